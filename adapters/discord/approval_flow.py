"""Approvals on Discord: posting the approval message, and Discord's side of the approval desk.

Nothing waits for the person: the approval message is posted and its reference stored, and a click
(in any process, also after a restart) is decided by the shared desk (`adapters.common.desk`),
which redraws the message and lets the turn go on. Discord's rules are here: the click acknowledged
within 3 seconds, the decision shown through the click's interaction (or by editing the stored
message), the clicker told why nothing changed, privately. A resumed turn reports to the
conversation's sink (`progress_for`), so what its servers ask is shown there; with jobs it runs as a
job any process takes (`launch`), else as a task here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from typing import Any

import discord

from adapters.common import refs
from adapters.common.desk import ApprovalClick, AskDesk
from adapters.common.tasks import Spawn
from adapters.discord.approval_message import ALL_CALLS, Click, approval_message, approval_view
from adapters.discord.delivery import NO_MENTIONS, ChannelGuard, ConversationOrder, landed, send_message, tell
from adapters.discord.incoming import PLATFORM, message_of
from adapters.jobs_runtime import Launcher
from bot.agent import Agent
from bot.types import (
    AgentReply,
    ApprovalPrompt,
    Ask,
    ConversationKey,
    Progress,
    no_progress,
)

logger = logging.getLogger(__name__)

RESUME_FAILED = "Sorry — something went wrong on my side while going on with this answer. Please ask again."


# Posts a reply in a conversation (its thread or DM), replying to a message if given.
PostToConversation = Callable[[ConversationKey, AgentReply, "int | None"], Awaitable[None]]


def parse_message_ref(ref: str | None) -> tuple[int, int] | None:
    """The channel and message ids a stored reference names; None when it names none."""
    found = refs.parse_message_ref(ref)
    if found is not None and found[0].isdigit() and found[1].isdigit():
        return int(found[0]), int(found[1])
    return None


def redrawn(prompt: ApprovalPrompt) -> dict[str, Any]:
    """What an edit of the approval message sets: its words, embeds and buttons (none once decided)."""
    shown = approval_message(prompt)
    return {
        "content": shown.content,
        "embeds": shown.embeds,
        "view": approval_view(prompt),
        "allowed_mentions": NO_MENTIONS,
    }


@dataclass(eq=False)
class ApprovalFlow:
    """Approval messages and clicks for one Discord client."""

    _: KW_ONLY
    agent: Agent
    client: discord.Client
    guard: ChannelGuard
    order: ConversationOrder
    post: PostToConversation
    spawn: Spawn
    # The sink a resumed turn (and the messages that waited behind it) report to.
    progress_for: Callable[[ConversationKey], Progress] = lambda key: no_progress
    launch: InitVar[Launcher | None] = None

    def __post_init__(self, launch: Launcher | None) -> None:
        # Where resumed turns run: a job any process takes (PostgreSQL), else a task here.
        self.desk = AskDesk(
            self.agent,
            PLATFORM,
            self,
            self,
            launch or Launcher(None, self.spawn, PLATFORM),
            self.spawn,
            on_expired=lambda: self.spawn(self.sweep(), "discord-approval-sweep"),
        )

    # --- showing a request -------------------------------------------------------------------------

    async def post_prompt(
        self,
        channel: discord.abc.Messageable,
        channel_id: int,
        prompt: ApprovalPrompt,
        reference: discord.MessageReference | None = None,
    ) -> discord.Message | None:
        """Post the approval message as a channel message and store where it is."""
        shown = approval_message(prompt)
        message = await send_message(
            channel,
            shown.content,
            guard=self.guard,
            channel_id=channel_id,
            embeds=shown.embeds,
            file=shown.file(),
            view=approval_view(prompt),
            reference=reference,
        )
        if message is None:
            logger.warning("could not post the approval message of request %s", prompt.request_id)
            return None
        await self._store_ref(prompt, channel_id, message.id)
        return message

    async def show_in_interaction(
        self, interaction: discord.Interaction[Any], prompt: ApprovalPrompt, channel_id: int, message_id: int
    ) -> bool:
        """Make the deferred `/ask` answer the approval message; False if its token no longer works."""
        shown = approval_message(prompt)
        view = approval_view(prompt)
        file = shown.file()
        extra: dict[str, Any] = {} if view is None else {"view": view}
        if view is not None and file is not None:
            extra["attachments"] = [file]
        edit = interaction.edit_original_response(
            content=shown.content, embeds=shown.embeds, allowed_mentions=NO_MENTIONS, **extra
        )
        failed = "showing approval request %s through interaction %s failed"
        if not await landed(edit, failed, prompt.request_id, interaction.id):
            return False
        await self._store_ref(prompt, channel_id, message_id)
        return True

    async def show_in_message(
        self, message: discord.Message | discord.PartialMessage, prompt: ApprovalPrompt, channel_id: int
    ) -> bool:
        """Make a message of ours (the turn's live answer) the approval message; False if it failed."""
        file = approval_message(prompt).file()
        edit = message.edit(attachments=[file] if file is not None else [], **redrawn(prompt))
        if not await landed(
            edit, "turning message %s into approval request %s failed", message.id, prompt.request_id
        ):
            return False
        await self._store_ref(prompt, channel_id, message.id)
        return True

    async def _store_ref(self, prompt: ApprovalPrompt, channel_id: int, message_id: int) -> None:
        await self.agent.ask_posted(Ask.of_approval(prompt), refs.message_ref(channel_id, message_id))

    async def edit(self, ref: str, prompt: ApprovalPrompt) -> None:
        """Update the approval message in place from the stored request (any process can do this)."""
        where = parse_message_ref(ref)
        if where is None:
            return
        channel_id, message_id = where
        partial = self.client.get_partial_messageable(channel_id).get_partial_message(message_id)
        await landed(partial.edit(**redrawn(prompt)), "could not update approval message %s", ref)

    # --- clicks --------------------------------------------------------------------------------------

    async def clicked(self, interaction: discord.Interaction[Any], click: Click) -> None:
        """A button click: acknowledge at once (Discord's 3 seconds), then decide and show the outcome."""
        if not await landed(
            interaction.response.defer(), "could not acknowledge approval click %s", interaction.id
        ):
            return
        pressed = ApprovalClick(
            choice=click.action,
            request_id=click.request_id,
            call=None if click.call == ALL_CALLS else click.call,
            shown_hash=click.shown_hash,
        )
        await self.desk.clicked(pressed, str(interaction.user.id), _Clicker(interaction))

    # --- going on ------------------------------------------------------------------------------------

    def resume_later(self, request_id: str) -> None:
        """Go on with a parked turn in the background: the click or submit that let it go on is
        answered already and must not wait for the turn."""
        self.spawn(self.desk.go_on(request_id, redraw=False), f"discord-resume-{request_id}")

    async def resume(self, request_id: str) -> None:
        """Resume a turn with nothing left to wait for (every call decided, every question answered
        or expired) and post its answer once, then answer the messages that waited."""
        found = await self.agent.parked(request_id)
        if found is None:
            return
        prompt, _ = found
        async with self.order.hold(prompt.key):
            try:
                final = await self.agent.resume(request_id, self.progress_for(prompt.key))
            except Exception:
                logger.exception("resuming parked request %s failed", request_id)
                final = AgentReply(text=RESUME_FAILED, failed=True)
            if final is None:
                return  # still open, or another process took it
            await self.post(prompt.key, final, None)
            await self._answer_deferred(prompt.key)

    async def answer_deferred(self, key: ConversationKey) -> None:
        """Answer the messages that waited behind a parked turn of this conversation."""
        async with self.order.hold(key):
            await self._answer_deferred(key)

    async def _answer_deferred(self, key: ConversationKey) -> None:
        try:
            async for incoming, reply in self.agent.deferred_replies(key, self.progress_for(key)):
                await self.post(key, reply, message_of(incoming.event_id))
        except Exception:
            logger.exception("answering the messages that waited in %s failed", key)

    async def sweep(self) -> None:
        """Requests past their expiry go on without the calls nobody approved (or with "cancel" for
        the questions nobody answered)."""
        await self.desk.sweep()


class _Clicker:
    """The person who clicked, answered through the click's interaction."""

    def __init__(self, interaction: discord.Interaction[Any]) -> None:
        self._interaction = interaction

    async def tell(self, text: str) -> None:
        await landed(tell(self._interaction, text), "could not tell the clicker why nothing changed")

    async def show(self, prompt: ApprovalPrompt) -> bool:
        edit = self._interaction.edit_original_response(**redrawn(prompt))
        failed = "updating the approval message through the click failed; editing it directly"
        return await landed(edit, failed, level=logging.INFO)

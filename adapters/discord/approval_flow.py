"""Approvals on Discord: posting the approval message, handling clicks, resuming parked turns.

A turn whose tool calls wait for a person is parked by the core, and nothing here waits for the
person either: the approval message is posted and its reference stored, and the click (in this
process or one started after a restart) decides, redraws the message in place, and resumes the
turn in the background. A turn parked on a server's question goes on the same way once its last
question is answered (`resume_later`, called by the form's flow). Expired requests are swept
periodically; at start-up, requests decided before a stop are resumed and messages that waited
behind them are answered.

A resumed turn runs with the conversation's progress sink (`progress_for`): what its servers ask
while it goes on is shown in the conversation, and its questions' messages say how they ended.
With jobs (PostgreSQL), resumed turns and the messages that waited are jobs of their conversation
that any process's worker runs (`launch`, `adapters.discord.jobs`); without, tasks of this process.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import discord

from adapters.common import refs
from adapters.common.tasks import Spawn
from adapters.discord.approval_buttons import ALL_CALLS, Click, approval_view, find_call, shown_hash
from adapters.discord.approval_message import approval_message
from adapters.discord.delivery import NO_MENTIONS, ChannelGuard, ConversationOrder, send_message
from adapters.discord.incoming import PLATFORM, message_of
from adapters.jobs_runtime import Launcher
from bot.approvals import EXPIRED, GONE
from bot.store.approvals import ApprovalLedger
from bot.types import (
    AgentReply,
    ApprovalPrompt,
    ConversationKey,
    Decision,
    Incoming,
    Progress,
    no_progress,
)

logger = logging.getLogger(__name__)

RESUME_FAILED = "Sorry — something went wrong on my side while going on with this answer. Please ask again."


class ApprovalAgent(Protocol):
    """What approvals need from the core `Agent`."""

    approvals: ApprovalLedger | None

    async def decide(
        self,
        request_id: str,
        user_id: str,
        *,
        approve: bool,
        call_id: str | None = None,
        shown_hash: str | None = None,
        remember: bool = False,
    ) -> Decision: ...

    async def resume(self, request_id: str, progress: Progress = ...) -> AgentReply | None: ...

    async def expire_due(self, platform: str | None = ...) -> list[str]: ...

    async def recover_parked(self, platform: str | None = ...) -> list[str]: ...

    def deferred_replies(
        self, key: ConversationKey, progress: Progress = ...
    ) -> AsyncIterator[tuple[Incoming, AgentReply]]: ...


# Posts a reply in a conversation (its thread or DM), replying to a message if given.
PostToConversation = Callable[[ConversationKey, AgentReply, "int | None"], Awaitable[None]]


def parse_message_ref(ref: str | None) -> tuple[int, int] | None:
    """The channel and message ids a stored reference names; None when it names none."""
    found = refs.parse_message_ref(ref)
    if found is not None and found[0].isdigit() and found[1].isdigit():
        return int(found[0]), int(found[1])
    return None


class ApprovalFlow:
    """Approval messages and clicks for one Discord client."""

    def __init__(
        self,
        *,
        agent: ApprovalAgent,
        client: discord.Client,
        guard: ChannelGuard,
        order: ConversationOrder,
        post: PostToConversation,
        spawn: Spawn,
        progress_for: Callable[[ConversationKey], Progress] = lambda key: no_progress,
        launch: Launcher | None = None,
    ) -> None:
        self._agent = agent
        self._client = client
        self._guard = guard
        self._order = order
        self._post = post
        self._spawn = spawn
        # Where resumed turns run: a job any process takes (PostgreSQL), else a task here.
        self._launch = launch or Launcher(None, spawn, PLATFORM)
        # The sink a resumed turn (and the messages that waited behind it) report to.
        self._progress_for = progress_for

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
            guard=self._guard,
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
        file = shown.file()
        view = approval_view(prompt)
        try:
            if file is not None and view is not None:
                message = await interaction.edit_original_response(
                    content=shown.content,
                    embeds=shown.embeds,
                    attachments=[file],
                    view=view,
                    allowed_mentions=NO_MENTIONS,
                )
            elif view is not None:
                message = await interaction.edit_original_response(
                    content=shown.content, embeds=shown.embeds, view=view, allowed_mentions=NO_MENTIONS
                )
            else:
                message = await interaction.edit_original_response(
                    content=shown.content, embeds=shown.embeds, allowed_mentions=NO_MENTIONS
                )
        except discord.HTTPException as exc:
            logger.warning(
                "showing approval request %s through interaction %s failed (%s %s)",
                prompt.request_id,
                interaction.id,
                exc.status,
                exc.text,
            )
            return False
        await self._store_ref(prompt, channel_id, message_id or message.id)
        return True

    async def show_in_message(
        self, message: discord.Message | discord.PartialMessage, prompt: ApprovalPrompt, channel_id: int
    ) -> bool:
        """Make a message of ours (the turn's live answer) the approval message; False if it failed."""
        shown = approval_message(prompt)
        file = shown.file()
        try:
            await message.edit(
                content=shown.content,
                embeds=shown.embeds,
                attachments=[file] if file is not None else [],
                view=approval_view(prompt),
                allowed_mentions=NO_MENTIONS,
            )
        except discord.HTTPException as exc:
            logger.warning(
                "turning message %s into approval request %s failed (%s %s)",
                message.id,
                prompt.request_id,
                exc.status,
                exc.text,
            )
            return False
        await self._store_ref(prompt, channel_id, message.id)
        return True

    async def _store_ref(self, prompt: ApprovalPrompt, channel_id: int, message_id: int) -> None:
        if self._agent.approvals is not None:
            await self._agent.approvals.set_message_ref(
                prompt.request_id, refs.message_ref(channel_id, message_id)
            )

    async def redraw(self, prompt: ApprovalPrompt) -> None:
        """Update the approval message in place from the stored request (any process can do this)."""
        where = parse_message_ref(prompt.message_ref)
        if where is None:
            return
        channel_id, message_id = where
        shown = approval_message(prompt)
        partial = self._client.get_partial_messageable(channel_id).get_partial_message(message_id)
        try:
            await partial.edit(
                content=shown.content,
                embeds=shown.embeds,
                view=approval_view(prompt),
                allowed_mentions=NO_MENTIONS,
            )
        except discord.HTTPException as exc:
            logger.warning(
                "could not update approval message %s (%s %s)", prompt.message_ref, exc.status, exc.text
            )

    # --- clicks --------------------------------------------------------------------------------------

    async def clicked(self, interaction: discord.Interaction[Any], click: Click) -> None:
        """A button click: acknowledge at once (Discord's 3 seconds), then decide and show the outcome."""
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            logger.warning(
                "could not acknowledge approval click %s: %s %s", interaction.id, exc.status, exc.text
            )
            return
        decision = await self._decide(str(interaction.user.id), click)
        if not decision.changed or decision.prompt is None:
            await self._tell_clicker(interaction, decision.note or GONE)
            if decision.note == EXPIRED:
                # Show the expiry now rather than at the next sweep.
                self._spawn(self.sweep(), "discord-approval-sweep")
            return
        prompt = decision.prompt
        shown = approval_message(prompt)
        try:
            await interaction.edit_original_response(
                content=shown.content,
                embeds=shown.embeds,
                view=approval_view(prompt),
                allowed_mentions=NO_MENTIONS,
            )
        except discord.HTTPException as exc:
            logger.info(
                "updating the approval message through the click failed (%s); editing it directly", exc
            )
            await self.redraw(prompt)
        if decision.ready:
            self.resume_later(prompt.request_id)

    async def _decide(self, user_id: str, click: Click) -> Decision:
        approvals = self._agent.approvals
        found = await approvals.prompt(click.request_id) if approvals is not None else None
        call_id: str | None = None
        shown: str | None = click.shown_hash
        if found is not None:
            prompt, _ = found
            expected = shown_hash(prompt, click.call)
            call = None if click.call == ALL_CALLS else find_call(prompt, click.call)
            call_id = call.call_id if call is not None else None
            if click.call != ALL_CALLS and call is None:
                return Decision(changed=False, prompt=prompt, note=GONE)
            if expected == click.shown_hash:
                # The button was drawn for exactly these calls: bind the decision to their full hash.
                shown = call.call_hash if call is not None else None
        return await self._agent.decide(
            click.request_id,
            user_id,
            approve=click.approve,
            call_id=call_id,
            shown_hash=shown,
            remember=click.remember,
        )

    async def _tell_clicker(self, interaction: discord.Interaction[Any], note: str) -> None:
        try:
            await interaction.followup.send(note, ephemeral=True, allowed_mentions=NO_MENTIONS)
        except discord.HTTPException as exc:
            logger.warning("could not tell the clicker why nothing changed: %s %s", exc.status, exc.text)

    # --- going on ------------------------------------------------------------------------------------

    def resume_later(self, request_id: str) -> None:
        """Go on with a parked turn in the background: the click or submit that let it go on is
        answered already and must not wait for the turn."""
        self._spawn(self._go_on(request_id), f"discord-resume-{request_id}")

    async def _go_on(self, request_id: str, *, redraw: bool = False) -> None:
        """A parked turn with nothing left to wait for goes on (`resume`): as a job of its
        conversation when jobs are shared, else as a task of this process."""
        key: ConversationKey | None = None
        approvals = self._agent.approvals
        if self._launch.jobs is not None and approvals is not None:
            found = await approvals.prompt(request_id)
            key = found[0].key if found is not None else None
        await self._launch.resume(request_id, key, lambda: self.resume(request_id, redraw=redraw))

    async def resume(self, request_id: str, *, redraw: bool = False) -> None:
        """Resume a turn with nothing left to wait for (every call decided, every question answered
        or expired) and post its answer once, then answer the messages that waited."""
        approvals = self._agent.approvals
        found = await approvals.prompt(request_id) if approvals is not None else None
        if found is None:
            return
        prompt, _ = found
        async with self._order.hold(prompt.key):
            if redraw:
                await self.redraw(prompt)
            try:
                final = await self._agent.resume(request_id, self._progress_for(prompt.key))
            except Exception:
                logger.exception("resuming parked request %s failed", request_id)
                final = AgentReply(text=RESUME_FAILED, failed=True)
            if final is None:
                return  # still open, or another process took it
            await self._post(prompt.key, final, None)
            await self._answer_deferred(prompt.key)

    async def answer_deferred(self, key: ConversationKey) -> None:
        """Answer the messages that waited behind a parked turn of this conversation."""
        async with self._order.hold(key):
            await self._answer_deferred(key)

    async def _answer_deferred(self, key: ConversationKey) -> None:
        try:
            async for incoming, reply in self._agent.deferred_replies(key, self._progress_for(key)):
                await self._post(key, reply, message_of(incoming.event_id))
        except Exception:
            logger.exception("answering the messages that waited in %s failed", key)

    async def sweep(self) -> None:
        """Requests past their expiry go on without the calls nobody approved (or with "cancel" for
        the questions nobody answered)."""
        for request_id in await self._agent.expire_due(PLATFORM):
            await self._go_on(request_id, redraw=True)

    async def recover(self) -> None:
        """At start-up: resume requests decided (or expired) before a stop; answer messages that waited."""
        approvals = self._agent.approvals
        if approvals is None:
            return
        for request_id in await self._agent.recover_parked(PLATFORM):
            await self._go_on(request_id, redraw=True)
        for key in await approvals.threads_with_deferred(PLATFORM):
            await self._launch.deferred(key, partial(self.answer_deferred, key))

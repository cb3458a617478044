"""Approvals on Discord: the approval message, its buttons, and Discord's side of the approval desk.

The message is rebuilt from the stored request each time (what is too long is attached in full), so
any process can redraw it. A button's custom_id carries all its click needs (action, request, call,
the start of the hash of what was shown), so it works in any process, after a restart too, and
decides only the call it was drawn for; the shared desk (`adapters.common.desk`) decides the click.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from typing import Any

import discord

from adapters.common import cards, refs
from adapters.common.desk import AT, HASH_CHARS, ApprovalClick, AskDesk, Choice, batch_hash, find_call
from adapters.common.tasks import Spawn
from adapters.discord.delivery import (
    NO_MENTIONS,
    ChannelGuard,
    ClickButton,
    ConversationOrder,
    acknowledge,
    fitted,
    landed,
    parse_message_ref,
    send_message,
    tell,
)
from adapters.discord.incoming import PLATFORM, message_of
from adapters.discord.render import (
    EMBED_DESCRIPTION_LIMIT,
    EMBED_TITLE_LIMIT,
    EMBED_TOTAL_LIMIT,
    EMBEDS_PER_MESSAGE,
    MESSAGE_LIMIT,
    EmbedsMessage,
    code_block,
    safe_text,
)
from adapters.jobs_runtime import Launcher
from bot.agent import Agent
from bot.text import truncate
from bot.types import (
    AgentReply,
    ApprovalPrompt,
    Ask,
    ConversationKey,
    PendingCall,
    Progress,
    SignedIn,
    no_progress,
)

ARGUMENTS_FILENAME = "approval-request.md"
REASON_LIMIT = 600
_COLOURS = {
    "pending": discord.Colour(0xF1C40F),
    "approved": discord.Colour(0x2ECC71),
    "denied": discord.Colour(0xE74C3C),
    "expired": discord.Colour(0x95A5A6),
}


def person(user_id: str | None) -> str:
    """A Discord user id as a mention (the message never pings: mentions are switched off)."""
    if user_id and user_id.isdigit():
        return f"<@{user_id}>"
    return f"`{user_id}`" if user_id else "someone"


def headline(prompt: ApprovalPrompt) -> str:
    """The first line: what waits, or how it ended."""
    tools = ", ".join(dict.fromkeys(f"`{c.tool}`" for c in prompt.calls))
    questions = cards.remember_questions(prompt.calls)
    if prompt.open and questions is not None:
        icon, asked = cards.questions_headline(questions)
        return f"{icon} **{asked}**"
    if prompt.open:
        return f"⏸️ **Waiting for approval** to run {tools}."
    if all(c.status == "expired" for c in prompt.calls):
        return f"⌛ **Not approved in time**: going on without {tools}."
    ends = [c.status if c.status in ("approved", "denied") else "not approved in time" for c in prompt.calls]
    parts = [
        f"{ends.count(end)} {end}" for end in ("approved", "denied", "not approved in time") if end in ends
    ]
    return f"☑️ **Decided** ({', '.join(parts)}): going on with the answer."


def _call_embed(index: int, call: PendingCall, description_limit: int) -> tuple[discord.Embed, bool]:
    title = truncate(f"{index}. {call.tool}", EMBED_TITLE_LIMIT)[0]
    description, cut = code_block(call.arguments_json(), description_limit, "json")
    if (question := cards.remember_question(call)) is not None:
        # A memory to keep reads as the question it is: the words themselves, not a call's arguments.
        title = truncate(question.headline, EMBED_TITLE_LIMIT)[0]
        description, cut = truncate(safe_text(question.text), description_limit)
    embed = discord.Embed(title=title, colour=_COLOURS[call.status], description=description)
    embed.add_field(name="Server", value=truncate(call.server, 1000)[0] or "-", inline=True)
    embed.add_field(name="Outcome", value=cards.decided(call).say(person=person), inline=True)
    return embed, cut


def request_file(prompt: ApprovalPrompt) -> str:
    """The whole request in Markdown: the reason and every call's arguments, nothing shortened."""
    parts = [f"# Approval request {prompt.request_id}\n"]
    if prompt.reason:
        parts.append(f"Why, in the model's words:\n\n{prompt.reason}\n")
    for index, call in enumerate(prompt.calls, start=1):
        arguments = json.dumps(call.arguments, ensure_ascii=False, indent=2)
        parts.append(
            f"## {index}. {call.server} / {call.tool}\n\nArguments:\n```json\n{arguments}\n```\n"
            f"Argument hash: {call.call_hash}\n"
        )
    return "\n".join(parts)


def approval_message(prompt: ApprovalPrompt) -> EmbedsMessage:
    lines = [headline(prompt)]
    reason, reason_cut = truncate(" ".join(prompt.reason.split()), REASON_LIMIT)
    if reason:
        # The model's words, written under a tool's influence: no disguised link, no preview.
        lines.append(f"> {safe_text(reason)}")
    if prompt.open:
        who = (
            person(prompt.requester)
            if cards.requesters_only(prompt.calls)
            else f"{person(prompt.requester)} or an admin"
        )
        lines.append(f"Only {who} can decide. Expires <t:{int(prompt.expires_at)}:R>.")
        them, tools = ("them all", "these tools") if len(prompt.calls) > 1 else ("it", "this tool")
        if cards.remember_questions(prompt.calls) is None:  # a memory is asked about each time
            lines.append(f"-# **Always allow here** approves {them} and stops asking for {tools} here.")
    shown = prompt.calls[:EMBEDS_PER_MESSAGE]
    hidden = len(prompt.calls) - len(shown)
    if hidden:
        lines.append(f"… and {hidden} more call{'s' if hidden != 1 else ''}: see the attached file.")
    per_embed = (EMBED_TOTAL_LIMIT - 200) // max(1, len(shown))
    description_limit = min(EMBED_DESCRIPTION_LIMIT, max(60, per_embed - 200))
    built = [_call_embed(i, call, description_limit) for i, call in enumerate(shown, start=1)]
    cut = reason_cut or hidden > 0 or any(was_cut for _, was_cut in built)
    content = truncate("\n".join(lines), MESSAGE_LIMIT)[0]
    if cut:
        content = truncate(
            content + "\n-# Shortened here; the attached file has it all in full.", MESSAGE_LIMIT
        )[0]
    embeds = [embed for embed, _ in built]
    return EmbedsMessage(content, embeds, request_file(prompt) if cut else None, ARGUMENTS_FILENAME)


_CODES: dict[Choice, str] = {
    "approve": "a",
    "deny": "d",
    "approve_all": "A",
    "deny_all": "D",
    "always": "R",
}
_ACTIONS: dict[str, Choice] = {code: action for action, code in _CODES.items()}
ALL_CALLS = "*"
_SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_.-]{1,48}")
TEMPLATE = (
    r"nerve:ap:(?P<action>[adADR]):(?P<request>[A-Za-z0-9_-]{1,24}):"
    r"(?P<call>[A-Za-z0-9_.~*-]{1,48}):(?P<hash>[0-9a-f]{12})"
)
# Discord shows at most five rows of five buttons; the last row holds the buttons for all calls.
CALL_ROWS = 4
CALLS_PER_ROW = 2


def call_ref(prompt: ApprovalPrompt, call: PendingCall) -> str:
    """How a button names a call: its id when that is short and plain, else its position."""
    return call.call_id if _SAFE_CALL_ID.fullmatch(call.call_id) else f"{AT}{prompt.calls.index(call)}"


def shown_hash(prompt: ApprovalPrompt, ref: str) -> str | None:
    """The short hash a button for `ref` must carry to decide on it; None when no such call exists."""
    if ref == ALL_CALLS:
        return batch_hash(prompt)
    call = find_call(prompt, ref)
    return call.call_hash[:HASH_CHARS] if call is not None else None


def custom_id(click: ApprovalClick) -> str:
    call = click.call or ALL_CALLS
    return fitted(f"nerve:ap:{_CODES[click.choice]}:{click.request_id}:{call}:{click.shown_hash}", TEMPLATE)


def parse(match: re.Match[str]) -> ApprovalClick:
    """A click read back from its custom_id; `*` names every open call (`call` None)."""
    return ApprovalClick(
        choice=_ACTIONS[match["action"]],
        request_id=match["request"],
        call=None if match["call"] == ALL_CALLS else match["call"],
        shown_hash=match["hash"],
    )


class ApprovalButton(ClickButton, template=TEMPLATE):
    """One approval button; its click goes to the client's `ApprovalFlow`."""

    route, fallback = "approval_flow", "Decide"
    click_id, read = staticmethod(custom_id), staticmethod(parse)


def _button(
    prompt: ApprovalPrompt, action: Choice, call: str | None, label: str, style: discord.ButtonStyle, row: int
) -> ApprovalButton:
    short = shown_hash(prompt, call or ALL_CALLS)
    assert short is not None
    click = ApprovalClick(choice=action, request_id=prompt.request_id, call=call, shown_hash=short)
    return ApprovalButton(click, label=label, style=style, row=row)


def approval_view(prompt: ApprovalPrompt) -> discord.ui.View | None:
    """The buttons for the calls still waiting; None once every call is decided (buttons go away)."""
    pending = [c for c in prompt.calls if c.status == "pending"]
    if not pending:
        return None
    view = discord.ui.View(timeout=None)
    green, red, grey = discord.ButtonStyle.success, discord.ButtonStyle.danger, discord.ButtonStyle.secondary
    last_row = 0 if len(prompt.calls) == 1 else CALL_ROWS
    questions = cards.remember_questions(prompt.calls)
    if len(prompt.calls) == 1:
        ref = call_ref(prompt, pending[0])
        yes, no = (questions[0].yes, questions[0].no) if questions else ("Approve", "Deny")
        view.add_item(_button(prompt, "approve", ref, yes, green, 0))
        view.add_item(_button(prompt, "deny", ref, no, red, 0))
    else:
        numbered = {c.call_id: i for i, c in enumerate(prompt.calls, start=1)}
        for slot, call in enumerate(pending[: CALL_ROWS * CALLS_PER_ROW]):
            ref, number, row = call_ref(prompt, call), numbered[call.call_id], slot // CALLS_PER_ROW
            view.add_item(_button(prompt, "approve", ref, f"Approve {number}. {call.tool}", green, row))
            view.add_item(_button(prompt, "deny", ref, f"Deny {number}", red, row))
        view.add_item(_button(prompt, "approve_all", None, "Approve all", green, last_row))
        view.add_item(_button(prompt, "deny_all", None, "Deny all", red, last_row))
    if questions is None:
        view.add_item(_button(prompt, "always", None, "Always allow here", grey, last_row))
    return view


logger = logging.getLogger(__name__)

RESUME_FAILED = "Sorry — something went wrong on my side while going on with this answer. Please ask again."


def redrawn(prompt: ApprovalPrompt, *, with_file: bool = False) -> dict[str, Any]:
    """An edit's words, embeds and buttons; `with_file` replaces the attachments of a message of ours."""
    shown = approval_message(prompt)
    drawn: dict[str, Any] = {"content": shown.content, "embeds": shown.embeds, "view": approval_view(prompt)}
    if with_file:
        drawn["attachments"] = [file] if (file := shown.file()) is not None else []
    return drawn | {"allowed_mentions": NO_MENTIONS}


@dataclass(eq=False)
class ApprovalFlow:
    """Approval messages and clicks for one Discord client."""

    _: KW_ONLY
    agent: Agent
    client: discord.Client
    guard: ChannelGuard
    order: ConversationOrder
    # Posts a reply in a conversation (its thread or DM), replying to a message if given.
    post: Callable[[ConversationKey, AgentReply, int | None], Awaitable[None]]
    spawn: Spawn
    # The sink a resumed turn (and the messages that waited behind it) report to.
    progress_for: Callable[[ConversationKey], Progress] = lambda key: no_progress
    # Where resumed turns run: a job any process takes (PostgreSQL), else a task here.
    launch: InitVar[Launcher]

    def __post_init__(self, launch: Launcher) -> None:
        self.desk = AskDesk(self.agent, PLATFORM, self, self, launch, self.spawn, on_expired=self.sweep_soon)

    # --- showing a request -------------------------------------------------------------------------

    async def post_prompt(
        self,
        channel: discord.abc.Messageable,
        channel_id: int,
        prompt: ApprovalPrompt,
        reference: discord.MessageReference | None = None,
    ) -> bool:
        """Post the approval message as a channel message and store where it is; False if it failed."""
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
            return False
        await self.agent.ask_posted(Ask.of_approval(prompt), refs.message_ref(channel_id, message.id))
        return True

    async def show_in(
        self, edit: Callable[..., Awaitable[object]], prompt: ApprovalPrompt, channel_id: int, message_id: int
    ) -> bool:
        """Make a message of ours (the turn's live answer, or the deferred `/ask` answer through its
        token) the approval message by its `edit`; False if that failed."""
        failed = "turning message %s into approval request %s failed"
        if not await landed(edit(**redrawn(prompt, with_file=True)), failed, message_id, prompt.request_id):
            return False
        await self.agent.ask_posted(Ask.of_approval(prompt), refs.message_ref(channel_id, message_id))
        return True

    async def edit(self, ref: str, prompt: ApprovalPrompt) -> None:
        """Update the approval message in place from the stored request (any process can do this)."""
        if (where := parse_message_ref(ref)) is not None:
            partial = self.client.get_partial_messageable(where[0]).get_partial_message(where[1])
            await landed(partial.edit(**redrawn(prompt)), "could not update approval message %s", ref)

    # --- clicks --------------------------------------------------------------------------------------

    async def clicked(self, interaction: discord.Interaction[Any], click: ApprovalClick) -> None:
        """A button click: acknowledge at once (Discord's 3 seconds), then decide and show the outcome."""
        if not await acknowledge(interaction):
            return
        await self.desk.clicked(click, str(interaction.user.id), _Clicker(interaction))

    # --- going on ------------------------------------------------------------------------------------

    def resume_later(self, request_id: str) -> None:
        """Go on with a parked turn in the background: the click or submit that let it go on must not wait."""
        self.spawn(self.desk.go_on(request_id, redraw=False), f"discord-resume-{request_id}")

    def resume_signed_in(self, signed: SignedIn) -> None:
        """Once a person signed in, each turn that waited for it goes on in the background."""
        for request_id in signed.request_ids:
            self.resume_later(request_id)

    async def resume(self, request_id: str) -> None:
        """Resume a turn with nothing left to wait for; post its answer once, then the ones that waited."""
        if (found := await self.agent.parked(request_id)) is None:
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
        async with self.order.hold(key):
            await self._answer_deferred(key)

    async def _answer_deferred(self, key: ConversationKey) -> None:
        try:
            async for incoming, reply in self.agent.deferred_replies(key, self.progress_for(key)):
                await self.post(key, reply, message_of(incoming.event_id))
        except Exception:
            logger.exception("answering the messages that waited in %s failed", key)

    def sweep_soon(self) -> None:
        """Requests past their expiry go on without the calls nobody approved (or the answers nobody gave)."""
        self.spawn(self.desk.sweep(), "discord-approval-sweep")


@dataclass
class _Clicker:
    """The person who clicked, answered through the click's interaction."""

    _interaction: discord.Interaction[Any]

    async def tell(self, text: str) -> None:
        await landed(tell(self._interaction, text), "could not tell the clicker why nothing changed")

    async def show(self, prompt: ApprovalPrompt) -> bool:
        edit = self._interaction.edit_original_response(**redrawn(prompt))
        failed = "updating the approval message through the click failed; editing it directly"
        return await landed(edit, failed, level=logging.INFO)

"""What an approval message looks like on Discord: one message per waiting batch of tool calls.

The content says what waits, why the model wants it, who may decide and until when; one embed per
call shows the server, the tool, the arguments in full and the call's outcome. Arguments (or a
reason) too long for embeds go into an attached file in full, so what a person approves is always
exactly what they could read. Nothing here does I/O; the message is rebuilt from the stored request
each time it changes, so any process can redraw it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import discord

from adapters.common import cards
from adapters.discord.render import (
    EMBED_DESCRIPTION_LIMIT,
    EMBED_TITLE_LIMIT,
    EMBED_TOTAL_LIMIT,
    EMBEDS_PER_MESSAGE,
    FILE_LIMIT_BYTES,
    MESSAGE_LIMIT,
    safe_text,
)
from bot.text import truncate
from bot.types import ApprovalPrompt, PendingCall

ARGUMENTS_FILENAME = "approval-request.md"
REASON_LIMIT = 600
WAITING_COLOUR = discord.Colour(0xF1C40F)
APPROVED_COLOUR = discord.Colour(0x2ECC71)
DENIED_COLOUR = discord.Colour(0xE74C3C)
EXPIRED_COLOUR = discord.Colour(0x95A5A6)
_COLOURS = {
    "pending": WAITING_COLOUR,
    "approved": APPROVED_COLOUR,
    "denied": DENIED_COLOUR,
    "expired": EXPIRED_COLOUR,
}


@dataclass(frozen=True, slots=True)
class ApprovalMessage:
    """The message's parts; `file_text` is set when something did not fit and is attached in full."""

    content: str
    embeds: list[discord.Embed]
    file_text: str | None

    def file(self) -> discord.File | None:
        if self.file_text is None:
            return None
        data = self.file_text.encode("utf-8")[:FILE_LIMIT_BYTES]
        return discord.File(io.BytesIO(data), filename=ARGUMENTS_FILENAME)


def person(user_id: str | None) -> str:
    """A Discord user id as a mention (the message never pings: mentions are switched off)."""
    if user_id and user_id.isdigit():
        return f"<@{user_id}>"
    return f"`{user_id}`" if user_id else "someone"


def call_status(call: PendingCall) -> str:
    """One call's outcome, with who decided it."""
    return cards.decided(call).say(person=person)


def headline(prompt: ApprovalPrompt) -> str:
    """The first line: what waits, or how it ended."""
    tools = ", ".join(dict.fromkeys(f"`{c.tool}`" for c in prompt.calls))
    if prompt.open:
        return f"⏸️ **Waiting for approval** to run {tools}."
    if all(c.status == "expired" for c in prompt.calls):
        return f"⌛ **Not approved in time**: going on without {tools}."
    approved = sum(1 for c in prompt.calls if c.status == "approved")
    denied = sum(1 for c in prompt.calls if c.status == "denied")
    expired = len(prompt.calls) - approved - denied
    parts = [f"{approved} approved"] if approved else []
    parts += [f"{denied} denied"] if denied else []
    parts += [f"{expired} not approved in time"] if expired else []
    return f"☑️ **Decided** ({', '.join(parts)}): going on with the answer."


def _arguments_block(call: PendingCall, limit: int) -> tuple[str, bool]:
    fence_open, fence_close = "```json\n", "\n```"
    room = max(0, limit - len(fence_open) - len(fence_close))
    # A backtick run inside would close the fence early; a zero-width joiner keeps it inert.
    body, cut = truncate(call.arguments_json().replace("```", "`\u200b``"), room)
    return f"{fence_open}{body}{fence_close}", cut


def _call_embed(index: int, call: PendingCall, description_limit: int) -> tuple[discord.Embed, bool]:
    title = truncate(f"{index}. {call.tool}", EMBED_TITLE_LIMIT)[0]
    description, cut = _arguments_block(call, description_limit)
    embed = discord.Embed(title=title, colour=_COLOURS[call.status], description=description)
    embed.add_field(name="Server", value=truncate(call.server, 1000)[0] or "-", inline=True)
    embed.add_field(name="Outcome", value=call_status(call), inline=True)
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


def approval_message(prompt: ApprovalPrompt) -> ApprovalMessage:
    """The message for the request in its current state (waiting, decided or expired)."""
    lines = [headline(prompt)]
    reason, reason_cut = truncate(" ".join(prompt.reason.split()), REASON_LIMIT)
    if reason:
        # The model's words, written under a tool's influence: no disguised link, no preview.
        lines.append(f"> {safe_text(reason)}")
    if prompt.open:
        lines.append(
            f"Only {person(prompt.requester)} or an admin can decide. Expires <t:{int(prompt.expires_at)}:R>."
        )
        if len(prompt.calls) > 1:
            lines.append("-# **Always allow here** approves them all and stops asking for these tools here.")
        else:
            lines.append("-# **Always allow here** approves it and stops asking for this tool here.")
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
    return ApprovalMessage(
        content=content,
        embeds=[embed for embed, _ in built],
        file_text=request_file(prompt) if cut else None,
    )

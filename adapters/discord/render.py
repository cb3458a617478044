"""Turning an `AgentReply` into what Discord accepts: message chunks, tool lines, result embeds.

Discord caps a message at 2,000 characters, an embed description at 4,096, all embeds of a message
at 6,000 together and a message at 10 embeds. Everything here stays inside those limits, and what
does not fit goes into a file instead of being lost. Nothing here does I/O.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from dataclasses import dataclass

import discord

from bot.render import pretty_json, split_markdown, truncate
from bot.types import AgentReply, Attachment

MESSAGE_LIMIT = 2000
EMBED_DESCRIPTION_LIMIT = 4096
EMBED_TOTAL_LIMIT = 6000
EMBEDS_PER_MESSAGE = 10
EMBED_TITLE_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
# How many tool lines the answer shows before summing up the rest: the button shows them all.
MAX_TOOL_LINES = 8
FILE_LIMIT_BYTES = 8 * 1024 * 1024

OK_COLOUR = discord.Colour(0x2ECC71)
ERROR_COLOUR = discord.Colour(0xE74C3C)
RESULTS_FILENAME = "tool-results.md"


def format_latency(ms: float) -> str:
    """`312 ms` below a second, `1.2 s` above: short enough for a one-line summary."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def tool_line(attachment: Attachment) -> str:
    """One compact line per tool call, in Discord's small subtext style."""
    mark = "✗" if attachment.is_error else "✓"
    return f"-# 🔧 {attachment.name} {mark} {format_latency(attachment.latency_ms)}"


def tool_lines(attachments: tuple[Attachment, ...]) -> str:
    lines = [tool_line(a) for a in attachments[:MAX_TOOL_LINES]]
    hidden = len(attachments) - MAX_TOOL_LINES
    if hidden > 0:
        lines.append(f"-# … and {hidden} more tool call{'s' if hidden != 1 else ''}")
    return "\n".join(lines)


def reply_chunks(reply: AgentReply, limit: int = MESSAGE_LIMIT) -> list[str]:
    """The answer as messages of at most `limit` characters, the tool lines at the end.

    The tool lines join the last chunk when they fit, else they get a message of their own, so the
    answer's own text is never squeezed or cut to make room for them.
    """
    chunks = split_markdown(reply.text, limit) or ["(no answer text)"]
    if reply.attachments:
        lines = truncate(tool_lines(reply.attachments), limit)[0]
        if len(chunks[-1]) + 2 + len(lines) <= limit:
            chunks[-1] = f"{chunks[-1]}\n\n{lines}"
        else:
            chunks.append(lines)
    return chunks


def _code_block(text: str, limit: int, lang: str = "") -> tuple[str, bool]:
    """`text` in a fenced block of at most `limit` characters; says whether it had to cut."""
    fence_open, fence_close = f"```{lang}\n", "\n```"
    room = max(0, limit - len(fence_open) - len(fence_close))
    # A backtick run inside would close the fence early; a zero-width joiner keeps it inert.
    body, cut = truncate(text.replace("```", "`\u200b``"), room)
    return f"{fence_open}{body}{fence_close}", cut


def _result_embed(
    attachment: Attachment, *, args_limit: int, description_limit: int
) -> tuple[discord.Embed, bool]:
    title = truncate(f"🔧 {attachment.name}", EMBED_TITLE_LIMIT)[0]
    colour = ERROR_COLOUR if attachment.is_error else OK_COLOUR
    description, cut_result = _code_block(pretty_json(attachment.content), description_limit, "json")
    embed = discord.Embed(title=title, colour=colour, description=description)
    embed.add_field(name="Status", value="error" if attachment.is_error else "ok", inline=True)
    embed.add_field(name="Latency", value=format_latency(attachment.latency_ms), inline=True)
    arguments, cut_args = _code_block(pretty_json(attachment.arguments_json()), args_limit, "json")
    embed.add_field(name="Arguments", value=arguments, inline=False)
    if attachment.truncated:
        embed.set_footer(text="The result was shortened before the model saw it.")
    return embed, cut_result or cut_args


@dataclass(frozen=True, slots=True)
class ResultsView:
    """What the "Tool results" button shows: embeds within Discord's limits, plus a file if needed."""

    embeds: list[discord.Embed]
    file_text: str | None
    note: str

    def file(self) -> discord.File | None:
        if self.file_text is None:
            return None
        data = self.file_text.encode("utf-8")[:FILE_LIMIT_BYTES]
        return discord.File(io.BytesIO(data), filename=RESULTS_FILENAME)


def results_view(attachments: tuple[Attachment, ...]) -> ResultsView:
    """Embeds for up to ten tool calls, sized to fit 6,000 characters together; the rest as a file."""
    shown = attachments[:EMBEDS_PER_MESSAGE]
    if not shown:
        return ResultsView(embeds=[], file_text=None, note="This answer used no tools.")
    per_embed = (EMBED_TOTAL_LIMIT - 100) // len(shown)
    args_limit = min(FIELD_VALUE_LIMIT, max(40, per_embed // 4))
    description_limit = min(EMBED_DESCRIPTION_LIMIT, max(40, per_embed - args_limit - 80))
    while True:
        built = [_result_embed(a, args_limit=args_limit, description_limit=description_limit) for a in shown]
        embeds = [embed for embed, _ in built]
        if sum(len(e) for e in embeds) <= EMBED_TOTAL_LIMIT or description_limit <= 40:
            break
        description_limit = max(40, description_limit * 3 // 4)
        args_limit = max(40, args_limit * 3 // 4)
    cut = any(was_cut for _, was_cut in built) or len(attachments) > len(shown)
    note = f"Results of {len(attachments)} tool call{'s' if len(attachments) != 1 else ''}."
    if cut:
        note += " Some are shortened here; the attached file has them in full."
    return ResultsView(embeds=embeds, file_text=results_file(attachments) if cut else None, note=note)


def results_file(attachments: tuple[Attachment, ...]) -> str:
    """Every tool call in full, as Markdown, for results too large for embeds."""
    parts = []
    for a in attachments:
        status = "error" if a.is_error else "ok"
        parts.append(
            f"## {a.name} ({status}, {format_latency(a.latency_ms)})\n\n"
            f"Arguments:\n```json\n{pretty_json(a.arguments_json())}\n```\n\n"
            f"Result:\n```\n{pretty_json(a.content)}\n```\n"
        )
    return "\n".join(parts)


class ResultsCache:
    """Tool results by reply reference, the newest `capacity` kept (least recently used go first).

    Kept in memory on purpose: the results are also in the conversation store, and after a restart
    the button says plainly that they are gone rather than the bot keeping a second copy on disk.
    """

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, tuple[Attachment, ...]] = OrderedDict()

    def put(self, ref: str, attachments: tuple[Attachment, ...]) -> None:
        self._items[ref] = attachments
        self._items.move_to_end(ref)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, ref: str) -> tuple[Attachment, ...] | None:
        found = self._items.get(ref)
        if found is not None:
            self._items.move_to_end(ref)
        return found

    def __len__(self) -> int:
        return len(self._items)

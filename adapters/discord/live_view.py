"""What the live answer shows while a turn runs: the text so far, a line per tool call, a status.

Discord has no streaming API, so the answer is shown as messages edited in place. This module lays
the turn so far (`adapters.common.turn_so_far`) out as message contents; `live.py` does the posting. The
layout is the final answer's: the text split at Discord's 2,000 characters with `split_markdown`
(never inside a word or a code fence; a fence still open at the end is closed, so it renders), then
the tool lines, so the final answer replaces the live one without moving anything around.
"""

from __future__ import annotations

import discord

from adapters.common.turn_so_far import Call, TurnSoFar, percent
from adapters.discord.render import MAX_TOOL_LINES, MESSAGE_LIMIT, format_latency, safe_chunks
from bot.text import truncate

WAITING_FOR_INPUT = "📝 waiting for an answer to a tool's question"


def call_line(call: Call) -> str:
    """`🔧 calling name…` while it runs, then the final answer's `🔧 name ✓ 312 ms`."""
    if call.finished is None:
        # The server's words, shown as they are: no Markdown of theirs takes effect.
        said = truncate(discord.utils.escape_markdown(" ".join(call.progress.split())), 120)[0]
        if said or call.fraction is not None:
            return f"-# 🔧 calling {call.name}… {said}{percent(call.fraction)}".rstrip()
        return f"-# 🔧 calling {call.name}…"
    mark = "✓" if call.ok else "✗"
    return f"-# 🔧 {call.name} {mark} {format_latency((call.finished - call.started) * 1000)}"


class LiveView(TurnSoFar):
    """The turn so far (`record` each event); `chunks()` lays it out as message contents."""

    def status_lines(self) -> str:
        calls = list(self.calls.values())
        lines = [call_line(call) for call in calls[:MAX_TOOL_LINES]]
        hidden = len(calls) - MAX_TOOL_LINES
        if hidden > 0:
            running = sum(1 for call in calls[MAX_TOOL_LINES:] if call.finished is None)
            lines.append(f"-# … and {hidden} more tool call{'s' if hidden != 1 else ''} ({running} running)")
        if self.status_line is not None:
            lines.append(f"-# {WAITING_FOR_INPUT if self.waiting else f'⏳ {self.status_line}'}")
        return "\n".join(lines)

    def chunks(self, limit: int = MESSAGE_LIMIT) -> list[str]:
        """The message contents to show now (empty while there is nothing to show)."""
        return layout(self.text, self.status_lines(), limit)


def layout(text: str, status: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Text chunks, then `status` joined to the last one when it fits, else in its own message (as
    `render.reply_chunks` places the final tool lines)."""
    chunks = safe_chunks(text, limit)
    if status:
        status = truncate(status, limit)[0]
        if chunks and len(chunks[-1]) + 2 + len(status) <= limit:
            chunks[-1] = f"{chunks[-1]}\n\n{status}"
        else:
            chunks.append(status)
    return chunks

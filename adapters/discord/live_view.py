"""What the live answer shows while a turn runs: the text so far, a line per tool call, a status.

Discord has no streaming API, so the answer is shown as messages edited in place. This module only
records the turn's events and lays them out as message contents; `live.py` does the posting. The
layout is the final answer's: the text split at Discord's 2,000 characters with `split_markdown`
(never inside a word or a code fence; a fence still open at the end is closed, so it renders), then
the tool lines, so the final answer replaces the live one without moving anything around.
"""

from __future__ import annotations

from dataclasses import dataclass

import discord

from adapters.discord.render import MAX_TOOL_LINES, MESSAGE_LIMIT, format_latency, safe_chunks
from bot.text import truncate
from bot.types import TurnEvent

WAITING_FOR_INPUT = "📝 waiting for an answer to a tool's question"


@dataclass(slots=True)
class _Call:
    name: str
    started: float
    finished: float | None = None
    ok: bool | None = None
    # What its server last reported while it runs ("step 2 of 3", 0.67).
    progress: str = ""
    fraction: float | None = None


def call_line(call: _Call) -> str:
    """`🔧 calling name…` while it runs, then the final answer's `🔧 name ✓ 312 ms`."""
    if call.finished is None:
        if call.progress or call.fraction is not None:
            percent = f" ({call.fraction:.0%})" if call.fraction is not None else ""
            return f"-# 🔧 calling {call.name}… {call.progress}{percent}".rstrip()
        return f"-# 🔧 calling {call.name}…"
    mark = "✓" if call.ok else "✗"
    return f"-# 🔧 {call.name} {mark} {format_latency((call.finished - call.started) * 1000)}"


class LiveView:
    """The turn's events, recorded as they come; `chunks()` lays them out as message contents."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._calls: dict[str, _Call] = {}
        self._status = ""

    def record(self, event: TurnEvent, now: float) -> bool:
        """Take one event; True when what is shown changed."""
        if event.kind == "thinking":
            # A new model round: the earlier round's text was a draft (next to tool calls, or one the
            # model was asked to reconsider), so it goes; the tool lines stay.
            changed = bool(self._pieces) or bool(self._status)
            self._pieces.clear()
            self._status = ""
            return changed
        if event.kind == "text":
            self._pieces.append(event.message)
            self._status = ""
            return bool(event.message)
        if event.kind == "tool_started":
            key = event.tool_call_id or f"{event.tool}#{len(self._calls)}"
            self._calls[key] = _Call(name=event.tool or "tool", started=now)
            return True
        if event.kind == "tool_finished":
            call = self._calls.get(event.tool_call_id or "")
            if call is None:
                return False
            call.finished, call.ok = now, bool(event.ok)
            return True
        if event.kind == "tool_progress":
            call = self._calls.get(event.tool_call_id or "")
            if call is None or call.finished is not None:
                return False
            # The server's words, shown as they are: no Markdown of theirs takes effect.
            said = discord.utils.escape_markdown(" ".join(event.message.split()))
            call.progress, call.fraction = truncate(said, 120)[0], event.fraction
            return True
        if event.kind == "ask" and event.ask is not None and event.ask.input is not None:
            self._status = WAITING_FOR_INPUT
            return True
        if event.kind == "ask_done":
            changed = self._status == WAITING_FOR_INPUT
            self._status = "" if changed else self._status
            return changed
        # "retrying", "notice" and the other asks (an approval, a sign-in): one status line, the newest.
        self._status = f"⏳ {event.message}"
        return True

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    def status_lines(self) -> str:
        calls = list(self._calls.values())
        lines = [call_line(call) for call in calls[:MAX_TOOL_LINES]]
        hidden = len(calls) - MAX_TOOL_LINES
        if hidden > 0:
            running = sum(1 for call in calls[MAX_TOOL_LINES:] if call.finished is None)
            lines.append(f"-# … and {hidden} more tool call{'s' if hidden != 1 else ''} ({running} running)")
        if self._status:
            lines.append(f"-# {self._status}")
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

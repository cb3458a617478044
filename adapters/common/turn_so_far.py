"""What a running turn has shown so far, folded from its `TurnEvent`s once for every platform: a
progress sink only records (it must return at once), each platform draws it at its own pace."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.types import TurnEvent


@dataclass(slots=True)
class Call:
    """One tool call: running until `finished` (the same clock as `started`), then `ok` or not."""

    id: str
    name: str
    server: str | None
    started: float
    finished: float | None = None
    ok: bool = False
    # What its server last reported while it ran: its words as they came, how far along (0..1).
    progress: str = ""
    fraction: float | None = None


def percent(fraction: float | None) -> str:
    """How far along a call is, for after its server's words: " (40%)", or nothing when unknown."""
    return f" ({fraction:.0%})" if fraction is not None else ""


@dataclass(slots=True)
class TurnSoFar:
    """The turn's events so far; `record` takes one and says whether what is shown changed."""

    text: str = ""
    calls: dict[str, Call] = field(default_factory=dict)
    # The newest line about the turn besides its words: a wait ("retrying in 2 s"), a notice, what
    # an ask is about. None once the words or a new round supersede it.
    status_line: str | None = None
    # That line is a server's question to a person, not answered yet.
    waiting: bool = False

    def record(self, event: TurnEvent, now: float) -> bool:
        """Take one event that happened at `now`; True when what is shown changed."""
        kind = event.kind
        if kind in ("thinking", "text"):
            # Words supersede the status line; a new round drops the earlier round's text (a draft
            # next to tool calls, or one the model was asked to reconsider).
            changed = (
                bool(event.message) if kind == "text" else bool(self.text) or self.status_line is not None
            )
            self.text = self.text + event.message if kind == "text" else ""
            self.status_line, self.waiting = None, False
            return changed
        if kind == "tool_started":
            key = event.tool_call_id or f"#{len(self.calls)}"
            self.calls[key] = Call(
                id=event.tool_call_id or "", name=event.tool or "tool", server=event.server, started=now
            )
            return True
        if kind in ("tool_finished", "tool_progress"):
            call = self.calls.get(event.tool_call_id or "")
            if call is None or call.finished is not None:
                return False  # only a running call changes
            if kind == "tool_finished":
                call.finished, call.ok = now, bool(event.ok)
            else:
                call.progress, call.fraction = event.message, event.fraction
            return True
        if kind == "ask_done":
            # How a question ended takes its line away; any other line stays.
            changed, self.waiting = self.waiting, False
            self.status_line = None if changed else self.status_line
            return changed
        # "retrying", "notice" and what a turn asks a person: the newest is the status line.
        self.status_line = event.message
        self.waiting = kind == "ask" and event.ask is not None and event.ask.input is not None
        return True

"""Reminders on the offline model, with the product's own schedule tools: "remind me in 2 minutes to
drink water", "what's scheduled?", "cancel reminder s1234abcd".

Only a message that says so in so many words is one; the general tool ranking never picks these
tools. The time now is read from the turn's note (`bot.schedules.tools.now_line`), so the
offline model counts "in 2 minutes" from the same clock as the turn, a test's fake one too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from bot.model.offline.answer import parse_result
from bot.text.turn_note import note_of
from bot.types import ChatMessage, ToolSpec

SERVER = "schedules"
_TOOLS = ("schedule", "list_schedules", "cancel_schedule")
# The turn note's line saying what time it is (written by `bot.schedules.tools.now_line`).
_NOW = re.compile(r"The current time is (?P<now>\S+?)[ .]")
# The line a scheduled run's turn carries (`bot.schedules.tools.scheduled_line`).
_SCHEDULED_RUN = "This message is a scheduled run"
_REMINDER = re.compile(r"^remind\s+me\s+(?:to|that|about)\s+(?P<what>.+?)[.!]*$", re.I | re.S)

Call = tuple[ToolSpec, dict[str, Any]]
Kind = Literal["schedule", "list", "cancel"]

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "ten": 10}
_UNITS = {"min": 60, "minute": 60, "hour": 3600, "hr": 3600, "day": 86400, "week": 604800}
_AMOUNT = r"(?P<n>\d+|an?|one|two|three|four|five|ten)\s+(?P<unit>min(?:ute)?|hours?|hrs?|days?|weeks?)s?"
_POLITE = r"(?:please\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
_REMIND_IN = re.compile(
    rf"^{_POLITE}remind\s+me\s+in\s+{_AMOUNT}\s*(?:,\s*)?(?:to\s+|that\s+|about\s+)?(?P<what>.+?)[.!]*$",
    re.I | re.S,
)
_REMIND_TO = re.compile(
    rf"^{_POLITE}remind\s+me\s+(?:to\s+|that\s+|about\s+)(?P<what>.+?)\s+in\s+{_AMOUNT}[.!]*$", re.I | re.S
)
_LIST = re.compile(
    r"^(?:what(?:'s|’s|\s+is|\s+have\s+i)\s+(?:got\s+)?scheduled"
    r"|(?:list|show)(?:\s+me)?\s+(?:all\s+)?(?:my\s+|the\s+)?(?:reminders|schedules)"
    r"|(?:what\s+are\s+)?my\s+(?:reminders|schedules))\b[\s?.!]*$",
    re.I,
)
_CANCEL = re.compile(
    r"^(?:please\s+)?(?:cancel|stop|delete|remove)\s+(?:the\s+|my\s+)?(?:reminder|schedule)\s+"
    r"(?P<id>s[0-9a-f]{8})\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class ScheduleRequest:
    kind: Kind
    what: str = ""
    seconds: float = 0.0
    schedule_id: str = ""


def read_request(question: str) -> ScheduleRequest | None:
    """What the person asked of their schedules, or None when the message asks nothing of them."""
    text = " ".join(question.split())
    for pattern in (_REMIND_IN, _REMIND_TO):
        if found := pattern.match(text):
            amount = found["n"].lower()
            count = int(amount) if amount.isdigit() else _NUMBERS[amount]
            unit = next(v for k, v in _UNITS.items() if found["unit"].lower().startswith(k))
            return ScheduleRequest("schedule", what=found["what"].strip(), seconds=count * unit)
    if _LIST.match(text):
        return ScheduleRequest("list")
    if found := _CANCEL.match(text):
        return ScheduleRequest("cancel", schedule_id=found["id"].lower())
    return None


def is_schedule_tool(tool: ToolSpec) -> bool:
    return tool.server == SERVER and tool.original_name in _TOOLS


def _tool(tools: Sequence[ToolSpec], original_name: str) -> ToolSpec | None:
    return next((t for t in tools if t.server == SERVER and t.original_name == original_name), None)


def _context(messages: Sequence[ChatMessage]) -> list[str]:
    """What the core said of this turn: the system prompt, and the note that ends the request."""
    return [*(m.content or "" for m in messages if m.role == "system"), note_of(messages)]


def _scheduled_run(messages: Sequence[ChatMessage]) -> bool:
    """The turn is a schedule's due run: its "Remind me to …" is the reminder itself."""
    return any(_SCHEDULED_RUN in text for text in _context(messages))


def _now(messages: Sequence[ChatMessage]) -> datetime | None:
    for text in _context(messages):
        if found := _NOW.search(text):
            try:
                return datetime.fromisoformat(found["now"])
            except ValueError:
                return None
    return None


def schedule_turn(
    question: str, messages: Sequence[ChatMessage], since: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> str | list[Call] | None:
    """The next step of a schedule request: the call to make, or the answer from its result; None
    when the question asks nothing of schedules, or the tool it needs is not offered here."""
    if _scheduled_run(messages) and (reminder := _REMINDER.match(" ".join(question.split()))):
        return f"⏰ Reminder: {reminder['what']}."
    request = read_request(question)
    if request is None:
        return None
    name = {"schedule": "schedule", "list": "list_schedules", "cancel": "cancel_schedule"}[request.kind]
    tool = _tool(tools, name)
    if tool is None:
        return None
    done = _result(since, tool)
    if request.kind == "schedule":
        if done is None:
            now = _now(messages)
            if now is None:
                return "I can't tell what time it is here, so I can't count from now: give me the time."
            at = (now + timedelta(seconds=request.seconds)).isoformat(timespec="seconds")
            prompt = f"Remind me to {request.what}"
            return [(tool, {"prompt": prompt, "at": at, "repeat": "", "timezone": ""})]
        return _scheduled(done)
    if request.kind == "list":
        return [(tool, {})] if done is None else _listing(done)
    if done is None:
        return [(tool, {"schedule_id": request.schedule_id})]
    if done[0]:
        return f"I couldn't cancel that: {_reason(done)}"
    return f"Cancelled {request.schedule_id}."


def _result(since: Sequence[ChatMessage], tool: ToolSpec) -> tuple[bool, Any, str] | None:
    """The tool's latest result since the question: (failed, its JSON, its text)."""
    calls = {c.id: c.name for m in since for c in m.tool_calls}
    found = None
    for m in since:
        if m.role == "tool" and (calls.get(m.tool_call_id or "") or m.name) == tool.name:
            data, text = parse_result(m.content or "")
            found = (m.is_error, data, text.strip())
    return found


def _reason(done: tuple[bool, Any, str]) -> str:
    return next((line.strip() for line in done[2].splitlines() if line.strip()), "no reason given")


def _scheduled(done: tuple[bool, Any, str]) -> str:
    failed, data, _ = done
    if failed or not isinstance(data, dict):
        return f"I didn't schedule that: {_reason(done)}"
    runs = data.get("next_runs") or []
    when = f" for {runs[0]}" if runs else ""
    return f"Scheduled{when}: {data.get('prompt', '')} (id {data.get('id', '?')})."


def _listing(done: tuple[bool, Any, str]) -> str:
    failed, data, _ = done
    if failed or not isinstance(data, dict):
        return f"I couldn't list your schedules: {_reason(done)}"
    listed = [s for s in data.get("schedules") or [] if isinstance(s, dict)]
    elsewhere = f"\n\n{data['elsewhere']}." if data.get("elsewhere") else ""
    if not listed:
        return f"Nothing is scheduled.{elsewhere}"
    lines = []
    for s in listed:
        runs = s.get("next_runs") or []
        repeat = "" if s.get("repeat") in (None, "once") else f", repeats {s['repeat']}"
        status = "" if s.get("status") == "active" else f", {s.get('status')}"
        lines.append(f"- {s.get('id')}: {s.get('prompt')} (next {runs[0] if runs else '—'}{repeat}{status})")
    # A real id, not a placeholder: `<id>` reads as markup where answers are rendered.
    example = listed[0].get("id")
    stop = f"To stop one, say “cancel reminder {example}”."
    return "Scheduled:\n\n" + "\n".join(lines) + elsewhere + "\n\n" + stop

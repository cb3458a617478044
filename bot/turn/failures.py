"""How a failed tool call reads: to the model with what to do next, to people with what happened (S10).

The store keeps the model's text as JSON with problem and instruction apart, so the people's text can
be rebuilt from it. A turn without the model's answer gets an apology, never stored as its words.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal, get_args

from bot.errors import ContextTooLong, LLMError, TurnOverdue
from bot.policy.platforms import FRESH_START
from bot.types import ChatMessage, Incoming, Platform

FailureKind = Literal[
    # The model's mistakes: it is told how to fix them and may try again.
    "arguments",
    "unknown_tool",
    "too_many_calls",
    "loop_guard",
    # The tool changed between the check and the call (`bot.mcp.host`): not run; it may be called
    # again as it is offered now, and is checked (and approved) anew.
    "changed",
    # The tool's: it is not called again in this turn.
    "execution",
    "timeout",
    "unavailable",
    "rate_limited",
    # A second call of a tool that already failed in this turn.
    "not_retried",
    # A person's: the call waited for approval and was denied, or nobody decided in time.
    "denied",
    "not_approved",
]
_KINDS: frozenset[str] = frozenset(get_args(FailureKind))
_UNAVAILABLE = "{tool} is temporarily unavailable ({detail})."
# How people read each kind of failure; the tool's own failures ("execution") say what it said.
_FOR_PEOPLE: dict[str, str] = {
    "arguments": "I could not call {tool} with valid arguments: {detail}.",
    "unknown_tool": "I could not call {tool}: there is no tool by that name.",
    "too_many_calls": "{tool} was not called. {detail}.",
    "loop_guard": "{tool} was not called again: {detail}.",
    "changed": "{tool} was not run: {detail}.",
    "denied": "{tool} was not run: {detail}.",
    "not_approved": "{tool} was not run: it was not approved in time.",
    "not_retried": "{tool} was not called again after it failed earlier in this answer ({detail}).",
    "timeout": _UNAVAILABLE,
    "unavailable": _UNAVAILABLE,
    "rate_limited": _UNAVAILABLE,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure:
    """A failed call: `detail` for people and model, `hint` (what to do next) for the model only."""

    tool: str
    kind: FailureKind
    detail: str
    hint: str = ""

    def for_model(self) -> str:
        """The tool message's content: JSON, so the model can tell the problem from the instruction."""
        body = {"error": self.detail, "kind": self.kind}
        if self.hint:
            body["hint"] = self.hint
        return json.dumps(body, ensure_ascii=False)

    def for_people(self) -> str:
        """One sentence per class; each class reads differently (bad arguments, failed, unavailable)."""
        detail = self.detail.strip().rstrip(".")
        said = _FOR_PEOPLE.get(self.kind) or ("{tool} failed: {detail}." if detail else "{tool} failed.")
        return said.format(tool=self.tool, detail=detail)


def stored_failure(message: ChatMessage) -> ToolFailure | None:
    """The failure a stored tool message records, or None for a result (or a body of another shape)."""
    if message.role != "tool" or not message.is_error:
        return None
    try:
        body = json.loads(message.content or "")
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("kind") not in _KINDS or not isinstance(body.get("error"), str):
        return None
    hint = body.get("hint")
    return ToolFailure(
        tool=message.name or "the tool",
        kind=body["kind"],
        detail=body["error"],
        hint=hint if isinstance(hint, str) else "",
    )


def shown_to_people(message: ChatMessage) -> str:
    """A stored tool message as people read it: a failure's people text, a result unchanged."""
    failure = stored_failure(message)
    return failure.for_people() if failure is not None else message.content or ""


MODEL_FAILED = "Sorry — the language model failed:"
TOO_LONG = "Sorry — this conversation is now longer than the model can read"


def model_failure(error: LLMError, incoming: Incoming, platform: Platform | None) -> str:
    """The apology for a model call that failed for good; `platform` is where it was written."""
    if isinstance(error, ContextTooLong):
        return (
            f"{TOO_LONG}, even with its older messages shortened: {fresh_start(incoming, platform)}, "
            "or ask something shorter."
        )
    if error.retry_after is not None:
        return f"{MODEL_FAILED} {error.headline}; please try again {in_about(error.retry_after)}."
    return f"{MODEL_FAILED} {error.message}. Please try again shortly."


def overdue(error: TurnOverdue) -> str:
    """The turn's model work took longer than NERVE_TURN_DEADLINE: what was still running."""
    took = f"{error.seconds:g} second{'' if error.seconds == 1 else 's'}"
    if error.step == "tools":
        return f"I could not finish within {took}; a tool was still running, so I stopped it."
    return (
        f"I could not finish within {took}; the model service did not answer in time. "
        "Please try again in a few minutes."
    )


def fresh_start(incoming: Incoming, platform: Platform | None) -> str:
    """How to start a new conversation where this message was written (a thread's own command if any)."""
    if platform is None:
        return FRESH_START
    if platform.fresh_start_in_thread is not None and not incoming.where().dm:
        return platform.fresh_start_in_thread
    return platform.fresh_start


def in_about(seconds: float) -> str:
    """A wait in words a person plans with: "in about 5 minutes", "in about 2 hours"."""
    if seconds < 90:
        count, unit = math.ceil(seconds), "second"
    elif seconds < 3600:
        count, unit = math.ceil(seconds / 60), "minute"
    else:
        count, unit = round(seconds / 3600), "hour"
    return f"in about {count} {unit}{'' if count == 1 else 's'}"

"""What a person reads when a turn ends without the model's answer.

Each says what happened and what would help: waiting, when the service said to, or starting afresh.
None is stored as the assistant's words: a re-delivered message tries again.
"""

from __future__ import annotations

import math

from bot.errors import ContextTooLong, LLMError, TurnOverdue
from bot.policy.platforms import FRESH_START
from bot.types import Incoming, Platform

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

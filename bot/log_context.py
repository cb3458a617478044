"""Which turn the running code belongs to, for log lines and traces.

Many conversations are answered at once in one process, so a log line alone does not say which one
it is about. The core marks the start of a turn (and of a resumed one) with `turn_context`; every
line logged and every span started inside it, in tasks it starts too, can then name the
conversation and the turn. A context variable carries it, so concurrent turns never see each other's.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from bot.types import ConversationKey


@dataclass(frozen=True, slots=True)
class Turn:
    """The conversation (`platform:workspace:channel:thread`) and a short id for this one turn."""

    conversation: str
    id: str


_current: ContextVar[Turn | None] = ContextVar("nerve_turn", default=None)


def new_turn_id() -> str:
    """Short and random: enough to tell the turns of a log apart, never derived from what was said."""
    return secrets.token_hex(4)


@contextmanager
def turn_context(key: ConversationKey) -> Iterator[Turn]:
    """Everything inside runs as one turn of `key`, with an id of its own."""
    turn = Turn(conversation=str(key), id=new_turn_id())
    token = _current.set(turn)
    try:
        yield turn
    finally:
        _current.reset(token)


def current_turn() -> Turn | None:
    """The turn the calling code runs in, or None outside any turn."""
    return _current.get()

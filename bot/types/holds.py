"""Which turn holds its conversation, as the front end that runs it sees it, and the stop requests
one process records for a turn another process runs.

Turns of a conversation run one at a time across every process sharing the store (`TurnLock`), each
under an id of its own while it holds the conversation. A front end that wants to know that id (to
stop exactly that turn, never a later one) sets a `HeldTurn` in the context its work starts in; the
lock fills it in while the turn holds the conversation and clears it after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from bot.types.conversation import ConversationKey


@dataclass(eq=False)
class HeldTurn:
    """One turn's hold on `key`'s conversation: `turn` is its id while it holds it, None before and after."""

    key: ConversationKey
    turn: str | None = None


# The HeldTurn of the work running in this context, if its front end asked to know.
HELD_TURN: ContextVar[HeldTurn | None] = ContextVar("nerve_held_turn", default=None)


@contextmanager
def holding(key: object, turn: str) -> Iterator[None]:
    """For a lock: the turn of this context holds `key`'s conversation as `turn` for the block."""
    held = HELD_TURN.get()
    if held is None or held.key != key:  # nobody asked, or a lock of something else (a schedule's run)
        yield
        return
    held.turn = turn
    try:
        yield
    finally:
        held.turn = None


class StopBoard(Protocol):
    """Stop requests shared by the processes on one store, each for one turn by its id."""

    async def request_stop(self, key: ConversationKey, by: str) -> str | None:
        """Record `by`'s stop for the turn holding `key`'s conversation in any process; that turn's
        id, or None when no turn holds it (nothing is recorded then)."""
        ...

    async def stops_asked(self, turn: str) -> list[str]:
        """Who asked to stop `turn` since it last looked; the requests are deleted once read."""
        ...

    async def stop_pending(self, turn: str) -> bool:
        """Whether a request for `turn` is still unread."""
        ...

    async def drop_stops(self, turn: str) -> None:
        """Delete `turn`'s unread requests (no turn took them in time)."""
        ...

"""How long the running turn can still wait for the model, for a client deciding whether to wait.

The turn's deadline (`bot.turn.deadline`) is an asyncio timeout the model client cannot see; a 429
asking for a longer wait than the turn has left is better given up on at once, so the next model in
the list can answer within the turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# The event loop's time at which the running turn's model work must end; None outside a turn.
_ends_at: ContextVar[float | None] = ContextVar("nerve_model_patience", default=None)


@contextmanager
def patience_until(when: float) -> Iterator[None]:
    """Inside, `seconds_left` counts down to the loop time `when`."""
    token = _ends_at.set(when)
    try:
        yield
    finally:
        _ends_at.reset(token)


def seconds_left() -> float | None:
    """Seconds the running turn can still wait, or None when no turn bounds the wait."""
    when = _ends_at.get()
    if when is None:
        return None
    return max(0.0, when - asyncio.get_running_loop().time())

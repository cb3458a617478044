"""A bound on the turns running at once, so a burst of messages cannot start a model call each.

The bound is a fixed number or a model's adaptive limit (`bot.model.concurrency`): when that limit
rises, waiting turns take the new slots at once; when it falls, running turns finish and no new one
starts until fewer run than the limit. Past the queue a turn is refused at once; a patient one (left
unanswered by a restart) still waits.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from bot.errors import NerveError
from bot.model.concurrency import AdaptiveLimit
from bot.observe import metrics

OnQueued = Callable[[int], Awaitable[None]]

BUSY_REPLY = "I'm busy right now — please try again in a minute."


def queued_notice(position: int) -> str:
    """What a waiting person sees while other questions are being answered."""
    return f"Busy with other questions — yours is number {position} in line…"


class GateFull(NerveError):
    """Every turn slot is taken and the queue behind them is full."""


class TurnGate:
    """At most `limit` turns inside at once; up to `queue` more wait first come, first served."""

    def __init__(self, *, limit: int | AdaptiveLimit, queue: int) -> None:
        if (isinstance(limit, int) and limit < 1) or queue < 0:
            raise ValueError("a turn gate needs limit >= 1 and queue >= 0")
        self._limit = limit
        self._queue = queue
        if isinstance(limit, AdaptiveLimit):
            limit.watch(self._wake)
        # Turns inside now (read by the gauges, like `waiting`).
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        metrics.watch_gate(self)

    @property
    def limit(self) -> int:
        """The turns allowed inside right now."""
        return self._limit if isinstance(self._limit, int) else self._limit.limit

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @asynccontextmanager
    async def admit(self, on_queued: OnQueued | None = None, *, patient: bool = False) -> AsyncIterator[None]:
        """Hold a slot for the block; `on_queued(position)` runs if the turn has to wait (1 = next).

        GateFull when the queue is full, unless `patient`: then it queues anyway (still counted in it)."""
        if self.running < self.limit and not self._waiters:
            self.running += 1
        elif len(self._waiters) >= self._queue and not patient:
            raise GateFull(f"{self.running} turns are running and {len(self._waiters)} are waiting")
        else:
            slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(slot)
            try:
                if on_queued is not None:
                    await on_queued(len(self._waiters))
                await slot
            except BaseException:
                if slot.done() and not slot.cancelled():
                    self._leave()  # the slot was already handed to us: pass it on
                else:
                    slot.cancel()
                    if slot in self._waiters:  # a leaving turn may have skipped it already
                        self._waiters.remove(slot)
                raise
        try:
            yield
        finally:
            self._leave()

    def _leave(self) -> None:
        self.running -= 1
        self._wake()

    def _wake(self) -> None:
        # Free slots go straight to the longest waiters, so a newcomer can never overtake the queue.
        while self._waiters and self.running < self.limit:
            slot = self._waiters.popleft()
            if not slot.done():
                self.running += 1
                slot.set_result(None)

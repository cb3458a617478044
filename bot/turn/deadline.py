"""One turn's time limit over all of its model work: every round's model requests, retries and tool calls.

Time spent waiting for a person does not count (`paused`). Writes that must land even when their
caller is cancelled go through `finish_anyway`, or the store would say the opposite.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from bot.errors import TurnOverdue, TurnStep
from bot.model.patience import patience_until


class TurnDeadline:
    """The time one turn has left for model work; `seconds` in all, used up only while running."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        # Seconds of model work so far, and the loop time the current stretch of it started (None:
        # not running, or paused for a person).
        self._spent = 0.0
        self._since: float | None = None
        self._timeout: asyncio.Timeout | None = None
        self._pauses = 0

    @asynccontextmanager
    async def running(self, step: TurnStep) -> AsyncIterator[None]:
        """Run the block on the time left, else raise TurnOverdue naming `step`; nested, the outer counts."""
        if self._timeout is not None:
            yield
            return
        loop = asyncio.get_running_loop()
        left = self.seconds - self._spent
        if left <= 0:
            raise TurnOverdue(self.seconds, step)
        self._since = loop.time()
        timeout = asyncio.timeout(left)
        try:
            async with timeout:
                self._timeout = timeout
                with patience_until(self._since + left):
                    yield
        except TimeoutError:
            if timeout.expired():
                raise TurnOverdue(self.seconds, step) from None
            raise
        finally:
            if self._since is not None:
                self._spent += loop.time() - self._since
            self._since, self._timeout, self._pauses = None, None, 0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the clock for the block while a person answers; it goes on when the last pause ends."""
        timeout = self._timeout
        if timeout is None:
            yield
            return
        loop = asyncio.get_running_loop()
        if self._pauses == 0 and self._since is not None:
            self._spent += loop.time() - self._since
            self._since = None
            if not timeout.expired():
                timeout.reschedule(None)
        self._pauses += 1
        try:
            yield
        finally:
            self._pauses -= 1
            if self._pauses == 0 and self._timeout is timeout:
                self._since = loop.time()
                if not timeout.expired():
                    timeout.reschedule(self._since + max(0.0, self.seconds - self._spent))


T = TypeVar("T")
logger = logging.getLogger(__name__)


# Seconds a cancelled caller waits for its write at most: a store that hangs must not hold a
# shutdown for ever (an anyio scope re-cancels at every turn of the loop while it waits).
PATIENCE = 10.0


async def finish_anyway(write: Coroutine[Any, Any, T]) -> T:
    """Run `write` to its end however often the caller is cancelled meanwhile (waiting at most PATIENCE
    seconds); then its result, or CancelledError when the caller was cancelled."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            raise  # the write itself was cancelled, or it ended just as the caller was
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not task.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            logger.warning("a write made while stopping took over %g s; not waiting for it", PATIENCE)
            raise asyncio.CancelledError
        try:
            await asyncio.wait({task}, timeout=remaining)
        except asyncio.CancelledError:
            continue  # cancelled again (an anyio scope does so at every await): keep waiting
    task.result()  # its error, if it failed
    raise asyncio.CancelledError

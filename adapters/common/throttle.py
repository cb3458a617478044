"""A live message's updates, paced. The platform's `send` deals with its own API's errors and limits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
# Seconds between the last send and one asked for `soon` (an answer's first words).
SOON = 0.5


class Throttle(Generic[T]):
    """Sends at most once per `interval`, from its own task, so recording an event never waits on the
    platform. A send is rendered when due: the first at once, later ones after their wait (the latest
    state)."""

    def __init__(
        self, render: Callable[[], T], send: Callable[[T], Awaitable[None]], interval: float
    ) -> None:
        self._render = render
        self._send = send
        self._interval = interval
        self._last = -1e9
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._sending = False
        self._closed = False

    def mark_sent(self, *, hold: float = 0.0) -> None:
        """Count a send made outside the throttle (the initial post), or ending now, towards the interval;
        `hold` (a rate limit's wait) keeps the next one back at least that long."""
        self._last = time.monotonic() + max(0.0, hold - self._interval)

    def request(self, *, soon: bool = False) -> None:
        """Ask for a send; `soon` (the first words of an answer) waits only `SOON` since the last one."""
        if self._closed:
            return
        if self._task is not None:
            self._again = True  # the running task sends the latest state when its turn comes
            return
        gap = min(self._interval, SOON) if soon else self._interval
        due = self._last + gap - time.monotonic()
        first = self._render() if due <= 0 else None
        self._task = asyncio.create_task(self._run(due, first))

    async def _run(self, due: float, first: T | None) -> None:
        try:
            payload = first
            while not self._closed:
                if payload is None:
                    if due > 0:
                        await asyncio.sleep(due)
                    payload = self._render()
                self._again = False
                self._last = time.monotonic()
                self._sending = True
                try:
                    await self._send(payload)
                finally:
                    self._sending = False
                if not self._again:
                    break
                payload, due = None, self._last + self._interval - time.monotonic()
        finally:
            self._task = None

    def stop(self) -> None:
        """Send nothing more; a send already on its way still lands."""
        self._closed = True
        if self._task is not None and not self._sending:
            self._task.cancel()

    async def close(self, limit: float | None = None) -> bool:
        """Drop any pending send and wait for one in flight, so nothing overwrites what comes next;
        one still on its way after `limit` seconds is cancelled (False)."""
        task = self._task
        self.stop()
        if task is None:
            return True
        try:
            async with asyncio.timeout(limit):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return False
        return True

"""The background work a front end owns: each task is awaited on drain and cancelled on close."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Spawn(Protocol):
    """Runs a coroutine as a task the front end owns; `name` names the task where it is shown. What the
    coroutine returns is dropped: the task is owned for its effects."""

    def __call__(self, work: Coroutine[Any, Any, object], name: str | None = None, /) -> object: ...


class Owned:
    """A front end's running tasks (its turns and what they set off)."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[object]] = set()

    def spawn(self, work: Coroutine[Any, Any, object], name: str | None = None) -> asyncio.Task[object]:
        task = asyncio.create_task(work, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def idle(self) -> None:
        """Wait until every task has finished (tests, graceful shutdown)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def drain(self, grace: float, turns: str) -> None:
        """Give the running tasks up to `grace` seconds; say how many `turns` were cut off. Waiting never
        cancels anything itself: only the front end knows which work is safe to stop where."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.tasks:
            left = deadline - loop.time()
            if left <= 0:
                logger.warning(
                    "nerve: %d %s still running after %g s (NERVE_SHUTDOWN_GRACE): cut off, answered at "
                    "the next start",
                    len(self.tasks),
                    turns,
                    grace,
                )
                return
            await asyncio.wait(list(self.tasks), timeout=left)

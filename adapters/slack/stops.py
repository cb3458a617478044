"""Slack's stop button (the `agent_session_stopped` event): it stops the work of the turn running in
that thread the way Ctrl-C does in the terminal.

The agent's work runs in a task of its own; the stop cancels that task, which cancels the model's
request and the running tool calls (an MCP call's cancelled scope sends `notifications/cancelled`).
The person's message stays stored, and the turn itself goes on to say in its live message that it
was stopped. Only a turn running in this process can be stopped here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from bot.types import ConversationKey

T = TypeVar("T")


class Stopped(Exception):
    """The person pressed stop while the turn worked."""


class Stops:
    """The work running in each thread of this process, and the stop that cancels it."""

    def __init__(self) -> None:
        self._work: dict[ConversationKey, asyncio.Future[object]] = {}
        self._pressed: set[asyncio.Future[object]] = set()

    async def run(self, key: ConversationKey, work: Awaitable[T]) -> T:
        """`work`'s result, or Stopped when the stop was pressed in its thread first."""
        task = asyncio.ensure_future(work)
        self._work[key] = task  # type: ignore[assignment]
        try:
            return await task
        except asyncio.CancelledError:
            # Stopped only when the work alone was cancelled, not the turn around it (a shutdown).
            current = asyncio.current_task()
            outer = current is not None and current.cancelling() > 0
            if task in self._pressed and task.cancelled() and not outer:
                raise Stopped from None
            raise
        finally:
            if self._work.get(key) is task:
                del self._work[key]
            self._pressed.discard(task)  # type: ignore[arg-type]

    def stop(self, key: ConversationKey) -> bool:
        """Cancel the work running in `key`'s thread; False when none runs here."""
        task = self._work.get(key)
        if task is None or task.done():
            return False
        self._pressed.add(task)
        task.cancel()
        return True

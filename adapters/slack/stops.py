"""Slack's stop button (the `agent_session_stopped` event): it stops the work of the turn running in
that thread the way Ctrl-C does in the terminal.

The agent's work runs in a task of its own; the stop cancels that task, which cancels the model's
request and the running tool calls (an MCP call's cancelled scope sends `notifications/cancelled`).
The person's message stays stored, and the turn itself goes on to say in its live message that it
was stopped. Only a turn running in this process can be stopped here.

A thread may hold several turns at once: the one answering, and messages waiting for the thread
behind it (the agent takes them in the order they came, `bot.store.locks`). The stop cancels the
oldest, the one answering; a waiting message is not stored yet, so it is never cancelled: it stays
in line and is answered. Only the person whose turn it is, or an admin, may stop it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, TypeVar

from bot.types import ConversationKey

T = TypeVar("T")
# What a press did: stopped the turn, refused (not the asker's turn), or found none running here.
StopOutcome = Literal["stopped", "not_yours", "none"]


class Stopped(Exception):
    """The person pressed stop while the turn worked."""


@dataclass(eq=False)
class _Work:
    """One turn's work in a thread, and who asked for it."""

    task: asyncio.Future[object]
    requester: str
    pressed: bool = False


class Stops:
    """The work running in each thread of this process, in arrival order, and the stop that cancels it."""

    def __init__(self, admins: frozenset[str] = frozenset()) -> None:
        self.admins = admins
        self._work: dict[ConversationKey, list[_Work]] = {}

    async def run(self, key: ConversationKey, work: Awaitable[T], requester: str = "") -> T:
        """`work`'s result, or Stopped when the stop was pressed for it first."""
        task = asyncio.ensure_future(work)
        entry = _Work(task, requester)  # type: ignore[arg-type]
        self._work.setdefault(key, []).append(entry)
        try:
            return await task
        except asyncio.CancelledError:
            # Stopped only when the work alone was cancelled, not the turn around it (a shutdown).
            current = asyncio.current_task()
            outer = current is not None and current.cancelling() > 0
            if entry.pressed and task.cancelled() and not outer:
                raise Stopped from None
            raise
        finally:
            entries = self._work.get(key, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self._work.pop(key, None)

    def working(self, key: ConversationKey) -> int:
        """The turns of `key`'s thread whose work runs or waits in this process."""
        return sum(not entry.task.done() for entry in self._work.get(key, []))

    def stop(self, key: ConversationKey, by: str) -> StopOutcome:
        """Cancel the turn answering in `key`'s thread, when `by` asked for it or is an admin."""
        running = [entry for entry in self._work.get(key, []) if not entry.task.done()]
        if not running:
            return "none"
        first = running[0]  # the one holding the thread; the others wait, unstored, behind it
        if by != first.requester and by not in self.admins:
            return "not_yours"
        first.pressed = True
        first.task.cancel()
        return "stopped"

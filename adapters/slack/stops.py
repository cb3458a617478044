"""Slack's stop button (the `agent_session_stopped` event): it stops the work of the turn answering
in that thread the way Ctrl-C does in the terminal, whichever process runs it.

The agent's work runs in a task of its own; the stop cancels that task, which cancels the model's
request and the running tool calls (an MCP call's cancelled scope sends `notifications/cancelled`).
The turn itself goes on to say in its live message that it was stopped, and whether the person's
message is kept: a message stopped while it waited for a free slot was never stored, and is not
answered later.

A thread may hold several turns at once: the one answering (holding the thread, in any process),
and messages waiting behind it (the agent takes them in the order they came). The stop cancels the
one holding the thread; a waiting message stays in line and is answered. Only the person whose turn
it is, or an admin, may stop it.

Replicas and workers share the turns of a thread through the store. When the turn holding the
thread runs in another process, the stop is recorded in the store for that turn alone (by the id it
holds the thread under, so it can never stop a later turn), and the running process, which looks
every STOP_POLL_SECONDS while a turn works, checks the rights and cancels it as a stop pressed there
would. A request no turn took within STOP_TAKEN_SECONDS is deleted, and the stop then counts as
pressed where nothing ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal, TypeVar

from bot.errors import StoreError
from bot.types import HELD_TURN, ConversationKey, HeldTurn, StopBoard

logger = logging.getLogger(__name__)

T = TypeVar("T")
# What a press did: stopped the turn, refused (not the asker's turn), handed it to the process
# running the turn, or found none running anywhere.
StopOutcome = Literal["stopped", "not_yours", "elsewhere", "none"]
# How often a working turn looks for stops pressed in other processes.
STOP_POLL_SECONDS = 0.5
# How long a stop recorded for another process's turn waits for that process to take it.
STOP_TAKEN_SECONDS = 5.0


class Stopped(Exception):
    """The person pressed stop while the turn worked."""


@dataclass(eq=False)
class _Work:
    """One turn's work in a thread, who asked for it, and its hold on the thread."""

    task: asyncio.Future[object]
    requester: str
    held: HeldTurn
    pressed: bool = False


class Stops:
    """The work running in each thread of this process, in arrival order, and the stop that cancels
    it; with a `board`, stops reach turns of other processes on the store too."""

    def __init__(
        self,
        admins: frozenset[str] = frozenset(),
        board: StopBoard | None = None,
        *,
        poll: float = STOP_POLL_SECONDS,
        taken_within: float = STOP_TAKEN_SECONDS,
    ) -> None:
        self.admins = admins
        self.board = board
        self.poll = poll
        self.taken_within = taken_within
        self._work: dict[ConversationKey, list[_Work]] = {}

    async def run(self, key: ConversationKey, work: Awaitable[T], requester: str = "") -> T:
        """`work`'s result, or Stopped when the stop was pressed for it first."""
        held = HeldTurn(key)
        token = HELD_TURN.set(held)  # the work's task starts in a copy of this context
        try:
            task = asyncio.ensure_future(work)
        finally:
            HELD_TURN.reset(token)
        entry = _Work(task, requester, held)  # type: ignore[arg-type]
        self._work.setdefault(key, []).append(entry)
        watch = asyncio.create_task(self._watch(entry)) if self.board is not None else None
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
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
            entries = self._work.get(key, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self._work.pop(key, None)

    def working(self, key: ConversationKey) -> int:
        """The turns of `key`'s thread whose work runs or waits in this process."""
        return sum(not entry.task.done() for entry in self._work.get(key, []))

    async def stop(self, key: ConversationKey, by: str) -> StopOutcome:
        """Cancel the turn holding `key`'s thread, when `by` asked for it or is an admin; in another
        process, through the board (waiting, bounded, until that process took the request)."""
        running = [entry for entry in self._work.get(key, []) if not entry.task.done()]
        holding = next((entry for entry in running if entry.held.turn is not None), None)
        if holding is not None:
            return self._stop(holding, by)
        turn = await self._request(key, by)
        if turn is None:
            # No turn holds the thread anywhere: the first of this process's, about to take it, if any.
            return self._stop(running[0], by) if running else "none"
        mine = next((entry for entry in running if entry.held.turn == turn), None)
        if mine is not None:  # it took the thread here meanwhile
            await self._drop(turn)
            return self._stop(mine, by)
        return "elsewhere" if await self._taken(turn) else "none"

    def _stop(self, entry: _Work, by: str) -> StopOutcome:
        if by != entry.requester and by not in self.admins:
            return "not_yours"
        entry.pressed = True
        entry.task.cancel()
        return "stopped"

    async def _watch(self, entry: _Work) -> None:
        """While the turn works: take the stops pressed for it in other processes."""
        assert self.board is not None
        # Ends with the work, not only by its cancellation: a cancel that a library drops on the way
        # (Python 3.11's `wait_for`) must not keep the turn waiting for its watcher forever.
        while not entry.task.done():
            await asyncio.sleep(self.poll)
            turn = entry.held.turn
            if turn is None:
                continue  # waiting for the thread: a stop goes to the turn holding it
            try:
                asked = await self.board.stops_asked(turn)
            except StoreError as exc:
                logger.warning("could not look for stops of a turn in %s: %s", entry.held.key, exc.message)
                continue
            for by in asked:
                outcome = self._stop(entry, by)
                logger.info("stop pressed in another process for %s by %s: %s", entry.held.key, by, outcome)
                if outcome == "stopped":
                    return

    async def _request(self, key: ConversationKey, by: str) -> str | None:
        if self.board is None:
            return None
        try:
            return await self.board.request_stop(key, by)
        except StoreError as exc:
            logger.warning("could not pass on the stop pressed in %s: %s", key, exc.message)
            return None

    async def _taken(self, turn: str) -> bool:
        """Whether the process running `turn` took its stop request in time (else it is deleted)."""
        assert self.board is not None
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.taken_within):
                    # Polled: the request lives in the store, which another process changes.
                    while await self.board.stop_pending(turn):  # noqa: ASYNC110
                        await asyncio.sleep(self.poll / 5)
                    return True
        except StoreError as exc:
            logger.warning("could not tell whether a stop was taken: %s", exc.message)
        await self._drop(turn)
        return False

    async def _drop(self, turn: str) -> None:
        assert self.board is not None
        try:
            await self.board.drop_stops(turn)
        except StoreError as exc:
            logger.info("could not delete a stop request (it expires by itself): %s", exc.message)

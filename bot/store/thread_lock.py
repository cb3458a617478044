"""Turns of one conversation run one at a time, in arrival order, across every process on the file.

A queue of tickets in `turn_locks`, not a lock row, because of the order: the live ticket with the
lowest number holds the conversation. Waiting only reads, so it holds no transaction. A turn pushes
its ticket's expiry forward while it waits or runs; a killed process's ticket expires and the next
waiter deletes it. Behind a turn of this process, a turn waits for its release in memory; behind
another process's, it polls with a short bounded backoff."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

import aiosqlite

from bot.errors import StoreError
from bot.store.connect import store_error
from bot.types import ConversationKey, holding

logger = logging.getLogger(__name__)

# A turn of a killed process keeps its conversation this long. Far above the heartbeat, so a busy
# event loop or a slow disk does not lose a live turn its place.
LEASE_SECONDS = 20.0
HEARTBEATS_PER_LEASE = 4
POLL_FIRST_SECONDS = 0.005
POLL_MAX_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class _Ticket:
    owner: str
    turn: str
    expires_at: float


@dataclass(eq=False)
class SQLiteTurnLock:
    """`db`: a connection of its own in autocommit; `clock` must agree across processes."""

    db: aiosqlite.Connection
    path: Path
    _: KW_ONLY
    lease: float = LEASE_SECONDS
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._owner = uuid.uuid4().hex
        self._db_lock = asyncio.Lock()
        # Per conversation: set when a turn of this process gives its ticket back.
        self._released: dict[str, asyncio.Event] = {}
        self._closed = False

    async def close(self) -> None:
        async with self._db_lock:
            if not self._closed:
                self._closed = True
                await self.db.close()

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        name = self._name(key)
        turn = uuid.uuid4().hex
        heartbeat: asyncio.Task[None] | None = None
        try:
            await self._enqueue(name, turn)
            heartbeat = asyncio.create_task(self._heartbeat(turn), name=f"turn-lease-{turn[:8]}")
            await self._wait_for_turn(name, turn)
            with holding(key, turn):
                yield
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)
            # By turn, not ticket number: it also removes a ticket whose INSERT a cancellation cut off
            # (statements run in order on the connection, so the INSERT has run before this DELETE).
            try:
                await self._execute("DELETE FROM turn_locks WHERE turn = ?", (turn,))
            except StoreError as exc:
                logger.warning(
                    "could not release the turn in %s (it expires by itself): %s", name, exc.message
                )
            finally:
                released = self._released.pop(name, None)
                if released is not None:
                    released.set()

    async def holder(self, key: ConversationKey) -> str | None:
        """The id of the turn holding `key`'s conversation in any process (the first live ticket)."""
        async with self._connection() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT turn FROM turn_locks WHERE lock_key = ? AND expires_at >= ?"
                    " ORDER BY ticket LIMIT 1",
                    (self._name(key), self.clock()),
                )
            )
        return str(rows[0][0]) if rows else None

    @staticmethod
    def _name(key: ConversationKey) -> str:
        return json.dumps([key.platform, key.workspace, key.channel, key.thread])

    async def _wait_for_turn(self, name: str, turn: str) -> None:
        delay, ahead_before = POLL_FIRST_SECONDS, -1
        while True:
            # Taken before the queue is read, so a release in between is not missed.
            released = self._released.setdefault(name, asyncio.Event())
            queue = await self._queue(name)
            mine = next((i for i, ticket in enumerate(queue) if ticket.turn == turn), None)
            if mine is None:
                logger.warning("a turn in %s lost its place (its lease ran out); queueing again", name)
                await self._enqueue(name, turn)
                continue
            if mine == 0:
                return
            ahead = queue[:mine]
            if len(ahead) != ahead_before:
                # The queue moved: the next turn may be a short one, so look again soon.
                delay, ahead_before = POLL_FIRST_SECONDS, len(ahead)
            now = self.clock()
            if any(ticket.expires_at < now for ticket in ahead):
                await self._take_over(name, now)
                continue
            if ahead[-1].owner == self._owner:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.lease):
                        await released.wait()
            else:
                await asyncio.sleep(delay)
                delay = min(delay * 2, POLL_MAX_SECONDS)

    async def _heartbeat(self, turn: str) -> None:
        while True:
            await asyncio.sleep(self.lease / HEARTBEATS_PER_LEASE)
            try:
                renewed = await self._execute(
                    "UPDATE turn_locks SET expires_at = ? WHERE turn = ?", (self.clock() + self.lease, turn)
                )
            except StoreError as exc:
                logger.warning("could not renew a turn's lease: %s", exc.message)
                continue
            if renewed == 0:
                # Waiting turns queue again by themselves; a running one can only go on and say so.
                logger.warning("a turn's lease ran out before it was renewed: another turn may overlap it")

    async def _enqueue(self, name: str, turn: str) -> None:
        await self._execute(
            "INSERT INTO turn_locks (lock_key, owner, turn, expires_at) VALUES (?, ?, ?, ?)",
            (name, self._owner, turn, self.clock() + self.lease),
        )

    async def _take_over(self, name: str, now: float) -> None:
        # Every expired ticket, not only this conversation's: nobody else would ever remove them.
        removed = await self._execute("DELETE FROM turn_locks WHERE expires_at < ?", (now,))
        if removed:
            # Tickets are places in a conversation's queue, not messages: a message whose turn was
            # cut off stays unfinished in the inbox and is answered (at the next start, or by a job).
            logger.warning(
                "took over conversation %s: cleared %d expired lock ticket(s) of a process that stopped"
                " renewing them; its conversations go on, and no message is lost",
                name,
                removed,
            )

    async def _queue(self, name: str) -> list[_Ticket]:
        async with self._connection() as db:
            rows = await db.execute_fetchall(
                "SELECT owner, turn, expires_at FROM turn_locks WHERE lock_key = ? ORDER BY ticket",
                (name,),
            )
        return [_Ticket(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    async def _execute(self, sql: str, params: tuple[object, ...]) -> int:
        """One statement, its own transaction; the number of rows it changed."""
        async with self._connection() as db, db.execute(sql, params) as cursor:
            return cursor.rowcount

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._db_lock:
            if self._closed:
                raise StoreError(f"the conversation store {self.path} is closed")
            try:
                yield self.db
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from exc

"""The conversation store on one SQLite file through aiosqlite (NERVE_DB, the embedded default).

Every write is one `BEGIN IMMEDIATE` transaction, so a round (an assistant message with tool calls plus
its tool results) lands whole or not at all, and a model is never sent a tool call without its result.
Single-statement reads have a connection of their own: WAL lets them run beside the writer, and each
sees every write committed before it, so they never wait for the turns' writes to take their turn.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeVar, cast

import aiosqlite

from bot.errors import StoreError
from bot.store.base import ConversationStore
from bot.store.connect import connect, rollback, store_error
from bot.store.dialect import SQLITE, Body, Connection
from bot.store.migrate import migrate
from bot.store.sqlite_thread import run_transaction
from bot.store.thread_lock import LEASE_SECONDS, SQLiteTurnLock

BUSY_TIMEOUT_MS = 5000
T = TypeVar("T")


class SQLiteStore(ConversationStore):
    _sql = SQLITE

    def __init__(
        self,
        db: aiosqlite.Connection,
        path: Path,
        inbox_db: aiosqlite.Connection,
        turn_lock: SQLiteTurnLock,
        reader: aiosqlite.Connection,
    ) -> None:
        self._db = db
        self._path = path
        # One connection is shared by every task, and its open transaction is visible to any statement
        # on it: reads take the lock too, so nobody sees (or writes into) another task's transaction.
        self._lock = asyncio.Lock()
        # The inbox has its own connection and lock: a platform's ack path records each delivery, and
        # must not queue behind the conversation writes of every turn in flight. Each inbox write is a
        # single statement, atomic on its own; SQLite's busy_timeout orders it with the other writer.
        self._inbox_db = inbox_db
        self._inbox_lock = asyncio.Lock()
        # Single-statement reads (`_read_one`): never inside a transaction, so each sees what was
        # committed before it; the lock only orders them with `close`.
        self._reader = reader
        self._reader_lock = asyncio.Lock()
        # Turns of one conversation, one at a time across every process on this file (its own connection).
        self.turn_lock: SQLiteTurnLock = turn_lock
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        migrations_dir: Path | None = None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        turn_lease_seconds: float = LEASE_SECONDS,
    ) -> SQLiteStore:
        try:
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for the conversation store {path}: {exc.strerror}"
            ) from exc
        db = await connect(path, busy_timeout_ms)
        opened = [db]
        try:
            await migrate(db, migrations_dir)
            opened += [await connect(path, busy_timeout_ms) for _ in ("inbox", "turn lock", "reads")]
        except BaseException as exc:
            for connection in opened:
                await connection.close()
            if isinstance(exc, sqlite3.Error):
                raise store_error(exc, path) from exc
            raise
        inbox_db, lock_db, reader = opened[1:]
        return cls(db, path, inbox_db, SQLiteTurnLock(lock_db, path, lease=turn_lease_seconds), reader)

    async def close(self) -> None:
        async with self._lock, self._inbox_lock, self._reader_lock:
            if not self._closed:
                self._closed = True
                await self._db.close()
                await self._inbox_db.close()
                await self._reader.close()
                await self.turn_lock.close()

    # --- plumbing ------------------------------------------------------------------------------

    def _read(self) -> AbstractAsyncContextManager[Connection]:
        return self._using(self._lock, self._db)

    def _read_one(self) -> AbstractAsyncContextManager[Connection]:
        return self._using(self._reader_lock, self._reader)

    def _inbox(self) -> AbstractAsyncContextManager[Connection]:
        return self._using(self._inbox_lock, self._inbox_db)

    def _write_one(self) -> AbstractAsyncContextManager[Connection]:
        # Under the connection's lock, outside any transaction: SQLite commits the statement by itself,
        # taking the file's write lock (and waiting out other processes' writers) as BEGIN IMMEDIATE does.
        return self._read()

    async def _transaction(self, body: Body[T]) -> T:
        # The whole transaction in one call on the connection's thread (`bot/store/sqlite_thread.py`).
        async with self._read():
            return await run_transaction(self._db, body)

    @asynccontextmanager
    async def _using(self, lock: asyncio.Lock, db: aiosqlite.Connection) -> AsyncIterator[Connection]:
        async with lock:
            if self._closed:
                raise StoreError(f"the conversation store {self._path} is closed")
            try:
                yield cast(Connection, db)
            except sqlite3.Error as exc:
                raise store_error(exc, self._path) from exc

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Connection]:
        async with self._read() as db:
            try:
                await db.execute("BEGIN IMMEDIATE")
                yield db
                if db.in_transaction:
                    await db.execute("COMMIT")
            except BaseException:
                # Always, not only when `in_transaction` says so: after a cancellation the statements
                # already queued on the connection's thread (BEGIN included) may not have run yet. The
                # ROLLBACK queues behind them and before any later statement, even if we are cancelled.
                await rollback(self._db)
                raise

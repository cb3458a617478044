"""psycopg's async connections: spoken to the way the ledgers speak to aiosqlite's, and pooled so
that a returning database is found within seconds.

Each statement with parameters has its `%` doubled and its `?` turned into psycopg's `%s`; so the
ledgers' SQL never has a `?` inside a string literal, nor PostgreSQL's jsonb `?` operators.
psycopg_pool doubles its pause after each failed attempt to reconnect (up to 32 s): after a 45 s
outage its next attempt may come 18 s after the database is back. `SteadyPool` caps that pause.

On Python 3.11 psycopg_pool waits for a free connection through `asyncio.wait_for`, which returns
the connection and drops the cancellation when both arrive at once: a stopped or timed-out turn
would carry on (a turn's stop watcher once polled forever that way, and its thread never answered
again). `SteadyPool.getconn` gives such a connection back and keeps the cancellation.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from bot.store.postgres_outage import OUTAGE, install

# The longest pause between two attempts to reconnect a pool.
RECONNECT_PAUSE_LONGEST = 2.0


@dataclass(frozen=True, slots=True)
class Done:
    rowcount: int


@lru_cache(maxsize=1024)
def to_psycopg(sql: str) -> str:
    """SQLite's `?` placeholders in psycopg's spelling, with literal `%` kept literal."""
    return sql.replace("%", "%%").replace("?", "%s")


def lock_key(namespace: int, name: str) -> tuple[int, int]:
    """The two int4 keys of a PostgreSQL advisory lock: a namespace of nerve's and a hash of `name`
    (two names sharing a hash only wait for each other, never run together)."""
    digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
    return namespace, int.from_bytes(digest, "big", signed=True)


class PostgresConnection:
    """One pooled connection in autocommit; `_write()` opens and ends its transactions."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    async def execute(self, sql: str, parameters: Iterable[Any] = (), /) -> Done:
        async with self._conn.cursor() as cursor:
            await self._run(cursor, sql, parameters)
            return Done(cursor.rowcount)

    async def execute_fetchall(self, sql: str, parameters: Iterable[Any] = (), /) -> list[tuple[Any, ...]]:
        async with self._conn.cursor() as cursor:
            await self._run(cursor, sql, parameters)
            return list(await cursor.fetchall()) if cursor.description is not None else []

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> Done:
        rows = [tuple(row) for row in parameters]
        if not rows:
            return Done(0)
        async with self._conn.cursor() as cursor:
            await cursor.executemany(to_psycopg(sql), rows)
            return Done(cursor.rowcount)

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != pq.TransactionStatus.IDLE

    @staticmethod
    async def _run(cursor: psycopg.AsyncCursor[Any], sql: str, parameters: Iterable[Any]) -> None:
        values = tuple(parameters)
        if values:
            await cursor.execute(to_psycopg(sql), values)
        else:
            # Without parameters psycopg sends the text as it is (a `%` needs no doubling).
            await cursor.execute(sql)


class SteadyPool(AsyncConnectionPool[Any]):
    """A pool opened by its owner, which notices a connection the server dropped before using it, and
    tells `bot.store.postgres_outage` when a connection succeeds: the end of an outage's lines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        install()
        defaults: dict[str, Any] = {"open": False, "check": AsyncConnectionPool.check_connection}
        super().__init__(*args, **defaults | kwargs)

    async def getconn(self, timeout: float | None = None) -> psycopg.AsyncConnection[Any]:  # noqa: ASYNC109 (psycopg_pool's signature)
        """psycopg_pool's, but a cancellation that came with the connection stays a cancellation."""
        task = asyncio.current_task()
        asked = task.cancelling() if task is not None else 0
        conn: psycopg.AsyncConnection[Any] = await super().getconn(timeout)
        if task is not None and task.cancelling() > asked:
            await self.putconn(conn)
            raise asyncio.CancelledError
        return conn

    async def _connect(self, timeout: float | None = None) -> psycopg.AsyncConnection[Any]:  # noqa: ASYNC109 (psycopg_pool's signature)
        conn: psycopg.AsyncConnection[Any] = await super()._connect(timeout)
        OUTAGE.reachable()
        return conn

    async def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is not None:
            # The pool doubles the pause after this attempt fails: keep the doubled one within bounds.
            attempt.delay = min(attempt.delay, RECONNECT_PAUSE_LONGEST / AttemptWithBackoff.DELAY_BACKOFF)
        await super()._add_connection(attempt, growing)

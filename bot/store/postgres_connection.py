"""psycopg's async connection, spoken to the way the ledgers speak to aiosqlite's.

The ledgers write `?` placeholders (SQLite's); psycopg takes `%s`, and reads a literal `%` as the start
of one. So each statement with parameters has its `%` doubled and its `?` turned into `%s` (cached:
the ledgers use a few dozen fixed statements). The ledgers' SQL never has a `?` inside a string
literal, nor PostgreSQL's jsonb `?` operators, which this would break.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import pq


@dataclass(frozen=True, slots=True)
class Done:
    """What a statement leaves behind that the ledgers read."""

    rowcount: int


@lru_cache(maxsize=1024)
def to_psycopg(sql: str) -> str:
    """SQLite's `?` placeholders in psycopg's spelling, with literal `%` kept literal."""
    return sql.replace("%", "%%").replace("?", "%s")


def lock_key(namespace: int, name: str) -> tuple[int, int]:
    """The two int4 keys of a PostgreSQL advisory lock: a namespace of nerve's and a hash of `name`.

    Two names may share a hash; that only makes them wait for each other, never run together.
    """
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

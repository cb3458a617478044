"""Turns of one conversation run one at a time, in arrival order, across every process on the database.

A turn queues behind its own process's earlier turns in memory (`KeyedLocks`), then takes a session
advisory lock named after the conversation, which the server grants in the order asked, so no
process starves another. A process that dies loses its connections and its locks: no lease to wait
out. Each conversation with a turn here holds one pooled connection, idle between statements.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from bot.errors import StoreError
from bot.store.locks import KeyedLocks
from bot.store.postgres_connection import lock_key
from bot.types import ConversationKey

logger = logging.getLogger(__name__)

# nerve's namespace of advisory locks for turns (the first key of each lock).
TURN_LOCKS = 0x6E657203


class PostgresTurnLock:
    """The `TurnLock` seam on PostgreSQL: `async with lock.hold(key):` around one turn."""

    def __init__(self, pool: AsyncConnectionPool[Any], namespace: str, where: str) -> None:
        """`pool` gives autocommit connections used for nothing else; `namespace` (the schema) keeps
        two stores on one database from sharing locks."""
        self._pool = pool
        self._namespace = namespace
        self._where = where
        self._local: KeyedLocks[str] = KeyedLocks()
        self._inside: dict[str, int] = {}

    def key_of(self, key: ConversationKey) -> tuple[int, int]:
        """The advisory lock of a conversation (for operators reading pg_locks, and the tests)."""
        return lock_key(TURN_LOCKS, self._name(key))

    def turns_in(self, key: ConversationKey) -> int:
        """This process's turns of the conversation that arrived and did not end (waiting or running)."""
        return self._inside.get(self._name(key), 0)

    def _name(self, key: ConversationKey) -> str:
        return json.dumps([self._namespace, key.platform, key.workspace, key.channel, key.thread])

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        """Wait for the conversation's earlier turns, in every process, then hold it until the block ends."""
        name = self._name(key)
        self._inside[name] = self._inside.get(name, 0) + 1
        try:
            async with self._local.hold(name), self._held(lock_key(TURN_LOCKS, name)):
                yield
        finally:
            self._inside[name] -= 1
            if not self._inside[name]:
                del self._inside[name]

    @asynccontextmanager
    async def _held(self, lock: tuple[int, int]) -> AsyncIterator[None]:
        """The conversation's advisory lock, on a session of its own until the block ends."""
        try:
            async with self._pool.connection() as conn:
                try:
                    await conn.execute("SELECT pg_advisory_lock(%s, %s)", lock)
                except BaseException:
                    # Cancelled while waiting (psycopg cancels the request on the server), or failed:
                    # the lock may have been granted just before. Closing the session drops it for sure.
                    await conn.close()
                    raise
                try:
                    yield
                finally:
                    await _release(conn, lock)
        except psycopg.Error as exc:
            raise StoreError(f"could not take a conversation's turn on {self._where}: {exc}") from exc


async def _release(conn: psycopg.AsyncConnection[Any], lock: tuple[int, int]) -> None:
    try:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", lock)
    except (psycopg.Error, asyncio.CancelledError) as exc:
        # The session is in doubt: end it, which releases every lock it holds.
        logger.warning("could not release a turn's lock (closing its connection instead): %s", exc)
        with suppress(psycopg.Error):
            await conn.close()
        if isinstance(exc, asyncio.CancelledError):
            raise


async def unlock_all(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's reset: a connection goes back holding no lock, whatever happened to its turn."""
    await conn.execute("SELECT pg_advisory_unlock_all()")

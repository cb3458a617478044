"""The conversation store on PostgreSQL (NERVE_DATABASE_URL), through psycopg 3 with a pool.

Like SQLite's `BEGIN IMMEDIATE`, one writer at a time per store (a transaction-scoped advisory lock
named after the schema): the ledgers read and then write inside a transaction, and that makes those
reads safe in every process at once. Reads and the inbox run in autocommit, in parallel. The schema
is the first of the search_path, so several stores can share one database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bot.errors import StoreError
from bot.store.base import ConversationStore
from bot.store.dialect import POSTGRES, Connection
from bot.store.locks import KeyedLocks
from bot.store.postgres_connection import PostgresConnection, SteadyPool, lock_key
from bot.store.postgres_migrate import current_schema, migrate_postgres
from bot.types import ConversationKey, holding

logger = logging.getLogger(__name__)

# nerve's namespace of advisory locks for write transactions (the first key); the second, the schema's.
WRITE_LOCKS = 0x6E657202
CONNECT_TIMEOUT_SECONDS = 10
POOL_SIZE = 10
# Each turn in flight holds one connection of its own (`PostgresTurnLock`).
TURN_LOCK_CONNECTIONS = 100
# A pooled connection is waited for this long before the statement fails.
POOL_WAIT_SECONDS = 30.0
# A turn waits for a lock connection as long as it would wait for the conversation.
TURN_LOCK_POOL_WAIT_SECONDS = 3600.0


class PostgresStore(ConversationStore):
    _sql = POSTGRES

    def __init__(
        self, pool: AsyncConnectionPool[Any], turn_lock: PostgresTurnLock, *, schema: str, where: str
    ) -> None:
        self._pool = pool
        self.turn_lock: PostgresTurnLock = turn_lock
        self.schema = schema
        self._where = where
        self._write_lock = lock_key(WRITE_LOCKS, schema)
        self._closed = False

    @classmethod
    async def open(cls, url: str, *, migrations_dir: Path | None = None) -> PostgresStore:
        """`url`: a libpq URL or key=value string; the schema is brought up to date."""
        where = describe(url)
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS}
        try:
            async with await psycopg.AsyncConnection.connect(url, **kwargs) as conn:
                await migrate_postgres(conn, migrations_dir)
                schema = await current_schema(conn)
        except psycopg.Error as exc:
            raise postgres_error(exc, where) from exc
        pool: AsyncConnectionPool[Any] = SteadyPool(
            url, min_size=1, max_size=POOL_SIZE, kwargs=kwargs, timeout=POOL_WAIT_SECONDS, name="nerve-store"
        )
        lock_pool: AsyncConnectionPool[Any] = SteadyPool(
            url,
            min_size=0,
            max_size=TURN_LOCK_CONNECTIONS,
            kwargs=kwargs,
            timeout=TURN_LOCK_POOL_WAIT_SECONDS,
            reset=unlock_all,
            name="nerve-turns",
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
            await lock_pool.open()
        except (psycopg.Error, PoolTimeout) as exc:
            await pool.close()
            await lock_pool.close()
            raise postgres_error(exc, where) from exc
        return cls(pool, PostgresTurnLock(lock_pool, schema, where), schema=schema, where=where)

    async def close(self) -> None:
        """Close the pools; a statement running now finishes first (within a few seconds)."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
        await self.turn_lock.close()

    async def ping(self) -> None:
        """For /readyz: a server that is away shows as a wait for a connection, which the caller bounds."""
        async with self._read() as db:
            await db.execute("SELECT 1")

    # --- plumbing ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[Connection]:
        if self._closed:
            raise StoreError(f"the conversation store {self._where} is closed")
        try:
            async with self._pool.connection() as conn:
                yield PostgresConnection(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            raise postgres_error(exc, self._where) from exc

    _inbox = _read

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Connection]:
        """The store's only write transaction at this moment; the body may end it itself (ROLLBACK)."""
        async with self._read() as db:
            try:
                await db.execute("BEGIN")
                await db.execute("SELECT pg_advisory_xact_lock(?, ?)", self._write_lock)
                yield db
                if db.in_transaction:
                    await db.execute("COMMIT")
            except BaseException:
                # After a cancellation psycopg has cancelled the statement on the server; the pool
                # throws away a connection it cannot bring back to idle, which ends the transaction.
                with suppress(psycopg.Error):
                    await db.execute("ROLLBACK")
                raise


def describe(url: str) -> str:
    """Where the store is, for messages: user, host, port, database; never the password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "PostgreSQL (NERVE_DATABASE_URL is not a valid connection URL)"
    host = str(info.get("host") or "localhost")
    port = str(info.get("port") or "5432")
    user = f"{info['user']}@" if info.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{info.get('dbname') or ''}"


def postgres_error(exc: BaseException, where: str) -> StoreError:
    """A message an operator can act on, instead of a raw psycopg traceback."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, PoolTimeout):
        return StoreError(
            f"the conversation store {where} did not give a connection in time ({text}): is the server"
            " up, and are its max_connections enough for every nerve process?"
        )
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError(
            f"the conversation store {where} refused: {text}. Grant the NERVE_DATABASE_URL user the"
            " rights to create and write tables in its schema"
        )
    if isinstance(exc, psycopg.IntegrityError):
        return StoreError(f"the conversation store {where} refused the write ({text}); nothing was saved")
    if isinstance(exc, psycopg.OperationalError):
        return StoreError(
            f"cannot reach the conversation store {where}: {text}. Check that PostgreSQL runs there and"
            " that NERVE_DATABASE_URL is right"
        )
    return StoreError(f"the conversation store {where} failed: {text}")


# nerve's namespace of advisory locks for turns (the first key of each lock).
TURN_LOCKS = 0x6E657203
# A turn's lock session is named after the turn while it holds the conversation, so another process
# can tell which turn that is (`holder`).
TURN_NAME = "nerve-turn "
# How long finding a conversation's holder waits for a connection.
HOLDER_WAIT_SECONDS = 5.0


class PostgresTurnLock:
    """The `TurnLock` seam on PostgreSQL. A turn queues behind its process's earlier turns in memory,
    then takes a session advisory lock named after the conversation, granted in the order asked; a
    dead process's locks go with its connections, with no lease to wait out."""

    def __init__(self, pool: AsyncConnectionPool[Any], namespace: str, where: str) -> None:
        """`pool`'s connections hold nothing else; `namespace` (the schema) keeps two stores apart."""
        self._pool = pool
        self._namespace = namespace
        self._where = where
        self._local: KeyedLocks[str] = KeyedLocks()

    def turns_in(self, key: ConversationKey) -> int:
        """This process's turns of the conversation that arrived and did not end (waiting or running)."""
        return self._local.users(self._name(key))

    def _name(self, key: ConversationKey) -> str:
        return json.dumps([self._namespace, key.platform, key.workspace, key.channel, key.thread])

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def hold(self, key: ConversationKey) -> AsyncIterator[None]:
        """In every process: the conversation's advisory lock, on a session of its own."""
        name = self._name(key)
        lock = lock_key(TURN_LOCKS, name)
        turn = uuid.uuid4().hex
        async with self._local.hold(name):
            try:
                async with self._pool.connection() as conn:
                    try:
                        # Named first: by the time the lock is granted, the session names its turn.
                        await conn.execute(
                            "SELECT set_config('application_name', %s, false), pg_advisory_lock(%s, %s)",
                            (TURN_NAME + turn, *lock),
                        )
                    except BaseException:
                        # Cancelled while waiting (psycopg cancels the request on the server), or failed: the
                        # lock may have been granted just before. Closing the session drops it for sure.
                        await conn.close()
                        raise
                    try:
                        with holding(key, turn):
                            yield
                    finally:
                        await _release(conn, lock)
            except psycopg.Error as exc:
                raise StoreError(f"could not take a conversation's turn on {self._where}: {exc}") from exc

    async def holder(self, key: ConversationKey) -> str | None:
        """The id of the turn holding `key`'s conversation in any process: the name of the session
        granted its advisory lock."""
        namespace, hashed = lock_key(TURN_LOCKS, self._name(key))
        try:
            async with self._pool.connection(timeout=HOLDER_WAIT_SECONDS) as conn:
                cursor = await conn.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
                    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    " AND l.classid::bigint = %s AND l.objid::bigint = %s",
                    (namespace & 0xFFFFFFFF, hashed & 0xFFFFFFFF),
                )
                rows = await cursor.fetchall()
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(
                f"could not tell which turn holds a conversation on {self._where}: {exc}"
            ) from exc
        names = [str(row[0] or "") for row in rows]
        return next((n.removeprefix(TURN_NAME) for n in names if n.startswith(TURN_NAME)), None)


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

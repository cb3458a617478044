"""The conversation store on each database the tests run it on: SQLite and PostgreSQL.

`Backend` is one fresh, empty database: a file for SQLite, a schema of its own for PostgreSQL
(created for the test and dropped after it, so parallel workers and runs never see each other). It
opens stores on that database (as many as a test wants, like several processes would), reads rows
through a connection of its own, and gives the settings or the location a subprocess needs.

PostgreSQL is at NERVE_TEST_DATABASE_URL (the Makefile and .ci/run set it). When it is set and the
server cannot be reached, the PostgreSQL tests fail saying so; they never skip.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import aiosqlite
import psycopg
import pytest

from bot.store.base import ConversationStore
from bot.store.postgres import PostgresStore
from bot.store.postgres_connection import to_psycopg
from bot.store.sqlite import SQLiteStore
from tests.pg_schemas import hold_owner_lock, schema_name

TEST_DATABASE_URL = "NERVE_TEST_DATABASE_URL"


class Backend(Protocol):
    name: str
    # A file path (SQLite) or a postgresql:// URL naming the test's schema: what a subprocess opens.
    location: str

    async def open(self) -> ConversationStore: ...

    async def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (`?` placeholders) on a connection of its own, as another process would."""
        ...

    def settings(self) -> dict[str, Any]:
        """The Settings fields that point nerve at this database."""
        ...

    async def everything_stored(self) -> list[bytes]:
        """Every byte the database keeps for nerve, to show what is never stored in the clear."""
        ...


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

    async def open(self) -> ConversationStore:
        return await SQLiteStore.open(self.path)

    async def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        async with aiosqlite.connect(self.path) as db:
            rows = [tuple(row) for row in await db.execute_fetchall(sql, params)]
            await db.commit()
            return rows

    def settings(self) -> dict[str, Any]:
        return {"nerve_db": self.path}

    async def everything_stored(self) -> list[bytes]:
        folder = self.path.parent
        return await asyncio.to_thread(lambda: [p.read_bytes() for p in folder.glob(f"{self.path.name}*")])


class PostgresBackend:
    name = "postgres"

    def __init__(self, server_url: str, schema: str) -> None:
        self.server_url = server_url
        self.schema = schema
        separator = "&" if "?" in server_url else "?"
        self.location = f"{server_url}{separator}options={quote(f'-csearch_path={schema}')}"

    async def open(self) -> ConversationStore:
        return await PostgresStore.open(self.location)

    async def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        async with await psycopg.AsyncConnection.connect(self.location, autocommit=True) as conn:
            cursor = await conn.execute(to_psycopg(sql) if params else sql, params or None)
            return [tuple(row) for row in await cursor.fetchall()] if cursor.description else []

    def settings(self) -> dict[str, Any]:
        return {"nerve_database_url": self.location}

    async def everything_stored(self) -> list[bytes]:
        """Each value of every table of the schema: bytea as its bytes, the rest as text."""
        found: list[bytes] = []
        async with await psycopg.AsyncConnection.connect(self.location, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,)
            )
            for (table,) in await cursor.fetchall():
                rows = await (await conn.execute(f'SELECT * FROM "{self.schema}"."{table}"')).fetchall()
                for row in rows:
                    found.extend(v if isinstance(v, bytes) else str(v).encode() for v in row)
        return found


def server_url() -> str:
    """The PostgreSQL server the tests use; skips (visibly) only when none is configured at all."""
    url = os.environ.get(TEST_DATABASE_URL, "").strip()
    if not url:
        pytest.skip(f"{TEST_DATABASE_URL} is not set (make test sets it): no PostgreSQL to test against")
    return url


async def admin(url: str) -> psycopg.AsyncConnection[Any]:
    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"{TEST_DATABASE_URL}={url} is set but that PostgreSQL cannot be reached: {exc}."
            " Start the server, or point the variable at one",
            pytrace=False,
        )


async def new_schema(url: str) -> str:
    """A schema no other test, worker or run uses, named so that a later run may drop it once it is
    old and this process is gone (`tests/pg_schemas.py`)."""
    async with await admin(url) as conn:
        await asyncio.to_thread(hold_owner_lock, url)
        schema = schema_name()
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema


async def drop_schema(url: str, schema: str) -> None:
    async with await admin(url) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def postgres_backend() -> AsyncIterator[PostgresBackend]:
    """A schema of its own on the test server, dropped afterwards."""
    url = server_url()
    schema = await new_schema(url)
    try:
        yield PostgresBackend(url, schema)
    finally:
        await drop_schema(url, schema)


# `make test-postgres` sets this: the tests' default database becomes PostgreSQL (a schema per test),
# so the whole suite runs a second time on it; tests that name SQLite keep SQLite.
DEFAULT_STORE = "NERVE_TEST_STORE"


@asynccontextmanager
async def default_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    """The database a test gets when it does not ask for one: SQLite in `tmp_path`, or PostgreSQL
    when NERVE_TEST_STORE=postgres."""
    if os.environ.get(DEFAULT_STORE, "sqlite").strip().lower() == "postgres":
        async with postgres_backend() as backend:
            yield backend
        return
    yield SQLiteBackend(tmp_path / "nerve.db")


class ManualSchedule:
    """The `wait` of a scheduled job, driven by the test: each wait records its seconds in `waits`
    and returns at the next `tick()`."""

    def __init__(self) -> None:
        self.waits: asyncio.Queue[float] = asyncio.Queue()
        self._ticks: asyncio.Queue[None] = asyncio.Queue()

    async def wait(self, seconds: float) -> None:
        self.waits.put_nowait(seconds)
        await self._ticks.get()

    def tick(self) -> None:
        self._ticks.put_nowait(None)

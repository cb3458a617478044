"""The database check when NERVE_DATABASE_URL is set (psycopg is the `postgres` extra): reached,
migrated as at start, a write tried and rolled back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from adapters.doctor.report import Check, error, ok, schema_news
from bot.errors import StoreError
from bot.store.postgres import CONNECT_TIMEOUT_SECONDS, PostgresStore, describe, postgres_error
from bot.store.postgres_migrate import current_schema

NAME = "database"
# The whole check, past which the server counts as not answering (a lock it waits on, an overload).
CHECK_LIMIT = 30.0
# A write that waits this long for a lock is reported, not waited out.
LOCK_TIMEOUT = "5s"
# What the server says when it does not let the user in (libpq's text, which has no SQLSTATE).
REFUSED_LOGIN = ("password authentication failed", "no pg_hba.conf entry", 'role "', "no password supplied")


async def check_postgres(url: str) -> Check:
    """Reach the server, open the store as nerve does (migrating it), try a write that is rolled back."""
    where = describe(url)
    try:
        async with asyncio.timeout(CHECK_LIMIT):
            return await _check(url, where)
    except TimeoutError:
        found = f"PostgreSQL at {where} did not finish the check within {CHECK_LIMIT:g} s"
        todo = "check the server's load, and whether another nerve holds the migration lock for long"
        return error(NAME, found, todo)


async def _check(url: str, where: str) -> Check:
    try:
        before, schema = await _version_before(url)
    except psycopg.Error as exc:
        return _unreachable(exc, url, where)
    except StoreError as exc:  # the search_path names no schema that exists
        todo = "fix options=-csearch_path=… in NERVE_DATABASE_URL, or create the schema"
        return error(NAME, exc.message, todo)
    try:
        store = await PostgresStore.open(url)
        await store.close()
        version = await _write_probe(url)
    except psycopg.errors.InsufficientPrivilege as exc:
        grant = f"grant the NERVE_DATABASE_URL user USAGE and CREATE on schema {schema}"
        found = f"{where} (schema {schema}) refused a write: {_first_line(exc)}"
        return error(NAME, found, f"{grant} and the right to write its tables")
    except (psycopg.Error, StoreError) as exc:
        failed = postgres_error(exc, where) if isinstance(exc, psycopg.Error) else exc
        return error(NAME, failed.message, "fix that, then run nerve doctor again")
    how = schema_news(before or None, version)
    return ok(NAME, f"{where} (schema {schema}): {how}schema version {version} (current), writable")


async def _connect(url: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(
        url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
    )


async def _version_before(url: str) -> tuple[int, str]:
    """The newest migration the schema has before the store opens it (0: none), and the schema."""
    async with await _connect(url) as conn:
        schema = await current_schema(conn)
        row = await (
            await conn.execute("SELECT to_regclass(format('%I.schema_migrations', current_schema()))")
        ).fetchone()
        return (0 if row is None or row[0] is None else await _newest(conn)), schema


async def _write_probe(url: str) -> int:
    """The schema version, after creating and writing a table in a transaction that is rolled back."""
    async with await _connect(url) as conn:
        version = await _newest(conn)
        async with conn.transaction(force_rollback=True):
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute("CREATE TABLE nerve_doctor_probe (written integer)")
            await conn.execute("INSERT INTO nerve_doctor_probe VALUES (1)")
    return version


async def _newest(conn: psycopg.AsyncConnection[Any]) -> int:
    row = await (await conn.execute("SELECT max(version) FROM schema_migrations")).fetchone()
    return int(row[0] or 0) if row else 0


def _unreachable(exc: psycopg.Error, url: str, where: str) -> Check:
    """A connection that failed: what the server (or the network) said, and what to change."""
    text = _first_line(exc)
    if isinstance(exc, psycopg.ProgrammingError):
        found = f"NERVE_DATABASE_URL is not a connection URL psycopg can read ({text})"
        return error(NAME, found, "write it as postgresql://user:password@host:5432/database")
    # A refusal at connect carries no SQLSTATE (libpq reports it as text), so the text decides too.
    sqlstate = exc.sqlstate or ""
    refused = f"PostgreSQL at {where} did not let nerve in: {text}"
    if sqlstate.startswith("28") or any(words in text for words in REFUSED_LOGIN):
        todo = "check the user and password in NERVE_DATABASE_URL, and that pg_hba.conf lets them in"
        return error(NAME, refused, todo)
    if sqlstate == "3D000" or ("database" in text and "does not exist" in text):
        return error(NAME, refused, "create the database, or fix its name in NERVE_DATABASE_URL")
    info = conninfo_to_dict(url)
    address = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
    todo = f"start PostgreSQL at {address}, or fix the host and port in NERVE_DATABASE_URL"
    return error(NAME, f"cannot reach PostgreSQL at {where}: {text}", todo)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

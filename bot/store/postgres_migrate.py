"""Forward-only migrations for a PostgreSQL store, applied under an advisory lock.

The same rules as SQLite's (`bot.store.migrate`), from `migrations/postgres/`, whose versions match
SQLite's one for one. Replicas starting together each take a session advisory lock named after the
schema before reading the ledger, so one migrates and the others find the work done.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

from bot.errors import StoreError
from bot.store.dialect import POSTGRES
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR, LEDGER, discover, refuse_unknown
from bot.store.postgres_connection import lock_key

POSTGRES_MIGRATIONS_DIR = DEFAULT_MIGRATIONS_DIR / "postgres"

# nerve's namespace of advisory locks for migrations (the first key); the second is the schema's hash.
MIGRATION_LOCKS = 0x6E657201


async def current_schema(conn: psycopg.AsyncConnection[Any]) -> str:
    """The schema new tables go to: the first of the search_path that exists."""
    row = await (await conn.execute("SELECT current_schema()")).fetchone()
    if row is None or row[0] is None:
        raise StoreError(
            "the PostgreSQL search_path names no schema that exists, so nerve has nowhere to create its"
            " tables: create the schema, or fix options=-csearch_path=… in NERVE_DATABASE_URL"
        )
    return str(row[0])


async def migrate_postgres(conn: psycopg.AsyncConnection[Any], directory: Path | None = None) -> list[int]:
    """`conn` in autocommit; psycopg's errors are raised as they are: the store words them."""
    known = await asyncio.to_thread(discover, directory or POSTGRES_MIGRATIONS_DIR)
    key = lock_key(MIGRATION_LOCKS, await current_schema(conn))
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", key)
    try:
        await conn.execute(LEDGER.format(now=POSTGRES.now))
        rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
        applied = {int(row[0]) for row in rows}
        refuse_unknown(applied, known, setting="NERVE_DATABASE_URL at another database or schema")
        pending = [migration for migration in known if migration.version not in applied]
        for migration in pending:
            try:
                async with conn.transaction():
                    await conn.execute(migration.sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )
            except psycopg.Error as exc:
                raise StoreError(f"migration {migration.label} failed and was rolled back: {exc}") from exc
        return [migration.version for migration in pending]
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)

"""procrastinate's tables, installed at start-up next to nerve's, once, whoever starts first.

Replicas of a deployment start at the same moment. Each takes the session advisory lock nerve's own
migrations take (`bot.store.postgres_migrate`, named after the schema), so exactly one installs the
schema and the others find it there. A schema already installed is left as it is: procrastinate's
tables hold jobs that are waiting, and its `schema.sql` is for a blank database only. A newer
procrastinate than the one pinned brings migrations of its own (its `sql/migrations/`), which an
operator applies when upgrading; nerve does not guess at them.

The tables go to the first schema of the connection's search_path, like nerve's, so a deployment
in a schema of its own (`options=-csearch_path=…`) keeps its jobs there.
"""

from __future__ import annotations

from typing import Any

import psycopg
from procrastinate.schema import SchemaManager

from bot.store.postgres_connection import lock_key
from bot.store.postgres_migrate import MIGRATION_LOCKS, current_schema

# The table every procrastinate installation has; its presence in the schema means "installed".
JOBS_TABLE = "procrastinate_jobs"


async def install_schema(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Create procrastinate's tables, types and functions in the connection's schema unless they are
    there; True if this call created them. `conn` is in autocommit."""
    schema = await current_schema(conn)
    key = lock_key(MIGRATION_LOCKS, schema)
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", key)
    try:
        if await is_installed(conn, schema):
            return False
        # Without parameters psycopg sends the whole script as it is, statements and `%` alike.
        async with conn.transaction():
            await conn.execute(SchemaManager.get_schema())
        return True
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)


async def is_installed(conn: psycopg.AsyncConnection[Any], schema: str) -> bool:
    """procrastinate's jobs table is in `schema` itself (one further along the search_path is not
    the one nerve's connections would write to)."""
    cursor = await conn.execute(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = %s", (schema, JOBS_TABLE)
    )
    return await cursor.fetchone() is not None

"""Forward-only schema migrations for the conversation store.

Each `migrations/NNNN_name.sql` file runs once, in numeric order, inside its own transaction, and is
recorded in the `schema_migrations` ledger in that same transaction: a migration either lands whole
with its ledger row or not at all. Files are never edited once released; a change is a new file.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from bot.errors import StoreError
from bot.store.connect import rollback
from bot.store.dialect import SQLITE

# The repository's migrations/ folder; the package is installed editable, so it sits next to bot/.
DEFAULT_MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

# The ledger of migrations, with a database's spelling of the current time (`Dialect.now`).
LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL DEFAULT ({now})
)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    version: int
    name: str
    sql: str
    label: str  # its file's name, NNNN_name.sql


def discover(directory: Path) -> list[Migration]:
    """In version order; a misnamed file (else skipped without a word) or a duplicate is an error."""
    if not directory.is_dir():
        raise StoreError(f"migrations folder not found: {directory}")
    found: dict[int, Migration] = {}
    try:
        for path in sorted(directory.glob("*.sql")):
            match = _FILE_NAME.match(path.name)
            if match is None:
                raise StoreError(
                    f"{path}: migration files must be named NNNN_name.sql (lower_snake_case name)"
                )
            version = int(match.group(1))
            if version in found:
                raise StoreError(f"{path}: migration version {version} is used by two files")
            sql = path.read_text(encoding="utf-8")
            found[version] = Migration(version=version, name=match.group(2), sql=sql, label=path.name)
    except OSError as exc:
        raise StoreError(f"could not read migrations in {directory}: {exc.strerror or exc}") from exc
    return [found[version] for version in sorted(found)]


async def applied_versions(db: aiosqlite.Connection) -> set[int]:
    """Versions recorded in the ledger (empty for a blank database)."""
    await db.execute(LEDGER.format(now=SQLITE.now))
    rows = await db.execute_fetchall("SELECT version FROM schema_migrations")
    return {int(row[0]) for row in rows}


async def migrate(db: aiosqlite.Connection, directory: Path | None = None) -> list[int]:
    """`db` in no transaction; returns the versions applied now. Each migration re-checks the ledger
    under `BEGIN IMMEDIATE`, against another process's."""
    directory = directory or DEFAULT_MIGRATIONS_DIR
    try:
        known = await asyncio.to_thread(discover, directory)
        applied = await applied_versions(db)
        refuse_unknown(applied, known, setting="NERVE_DB at another file")
        done: list[int] = []
        for migration in known:
            if migration.version not in applied and await apply_one(db, migration):
                done.append(migration.version)
        if done:
            # A migration may replace what must not stay on disk (0003 removes tokens); the WAL still
            # holds the pages as they were before it. Copy them back and empty the WAL. Best effort:
            # with another process reading, SQLite checkpoints what it can and says busy.
            await db.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
        return done
    except sqlite3.Error as exc:
        raise StoreError(f"could not migrate the conversation store: {exc}") from exc


def refuse_unknown(applied: set[int], known: list[Migration], *, setting: str) -> None:
    """A database written by a newer nerve is not written with an older idea of its schema."""
    unknown = sorted(applied - {migration.version for migration in known})
    if not unknown:
        return
    newest = max((migration.version for migration in known), default=0)
    raise StoreError(
        f"the database has schema migration {unknown[-1]:04d}, but this version of nerve knows migrations "
        f"only up to {newest:04d}: it was written by a newer nerve. Upgrade nerve, or point {setting}."
    )


async def apply_one(db: aiosqlite.Connection, migration: Migration) -> bool:
    """Run one migration and its ledger row in one transaction; False if another process beat us."""
    # executescript commits any pending transaction before it runs, so the transaction has to be
    # opened by the script itself. The ledger row goes first: under BEGIN IMMEDIATE it is our claim,
    # and a second process migrating the same file at the same moment fails on it and backs off.
    # Splicing is safe here: version is an int and name matched [a-z0-9_]+.
    script = (
        "BEGIN IMMEDIATE;\n"
        f"INSERT INTO schema_migrations (version, name) VALUES ({migration.version:d}, '{migration.name}');\n"
        f"{migration.sql}\n"
    )
    try:
        await db.executescript(script)
        if not db.in_transaction:
            raise StoreError(
                f"migration {migration.label} ended the transaction itself: remove BEGIN/COMMIT from it"
            )
        await db.execute("COMMIT")
    except BaseException as exc:
        # Unconditionally: statements queued before a cancellation may not have run yet.
        await rollback(db)
        if isinstance(exc, sqlite3.Error):
            if migration.version in await applied_versions(db):
                return False
            raise StoreError(f"migration {migration.label} failed and was rolled back: {exc}") from exc
        raise
    return True

"""Connections to the SQLite file, and SQLite errors turned into messages an operator can act on.

Why these settings: WAL lets a reader (`nerve history`) look while the bot writes; `synchronous=NORMAL`
in WAL survives a crash of the application (only a power loss may drop the last commits) at about
four times the commit rate of FULL; `busy_timeout` makes a second process wait for the write lock
instead of failing at once; `secure_delete` overwrites what is deleted or replaced (pruned inbox
entries, answered events' payloads) instead of leaving it readable in the file's free space.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from pathlib import Path

import aiosqlite

from bot.errors import StoreError


async def rollback(db: aiosqlite.Connection) -> None:
    # SQLite may have rolled back already (e.g. after a full disk); then nothing is left open.
    with contextlib.suppress(sqlite3.Error):
        await db.execute("ROLLBACK")


async def connect(path: Path, busy_timeout_ms: int) -> aiosqlite.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves instead of sqlite3's implicit ones.
    db = aiosqlite.connect(path, isolation_level=None)
    try:
        await db
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc
    try:
        await db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms):d}")
        mode = await switch_to_wal(db, busy_timeout_ms)
        if str(mode).lower() != "wal":
            raise StoreError(f"{path}: could not switch the conversation store to WAL (mode is {mode})")
        await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("PRAGMA foreign_keys = ON")
        await db.execute("PRAGMA secure_delete = ON")
    except BaseException as exc:
        await db.close()
        if isinstance(exc, sqlite3.Error):
            raise store_error(exc, path) from exc
        raise
    return db


async def switch_to_wal(db: aiosqlite.Connection, busy_timeout_ms: int) -> str:
    """Switch a file to WAL, waiting out other openers doing the same.

    The switch needs the file's write lock. Two processes opening a new file at once each hold a read
    lock and want the write lock; SQLite breaks that deadlock by answering one "locked" at once,
    without calling the busy handler. So that opener waits and tries again, within the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause = 0.005
    while True:
        try:
            rows = await db.execute_fetchall("PRAGMA journal_mode = WAL")
            return str(next(iter(rows))[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)


def store_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """A message an operator can act on, instead of a raw sqlite3 traceback."""
    text = str(exc)
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"the conversation store {path} is busy (database is locked): another process is holding it;"
            " try again, or stop the other nerve using this file"
        )
    if "full" in lowered:
        return StoreError(f"the conversation store {path} could not write: the disk is full")
    if "readonly" in lowered or "read-only" in lowered:
        return StoreError(f"the conversation store {path} is read-only: check the file's permissions")
    if "unable to open" in lowered:
        return StoreError(
            f"cannot open the conversation store {path}: check that the folder exists and is writable"
        )
    if "not a database" in lowered or "malformed" in lowered:
        return StoreError(f"{path} is not a usable nerve database ({text}): move it aside or set NERVE_DB")
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"the conversation store {path} refused the write ({text}); nothing was saved")
    return StoreError(f"the conversation store {path} failed: {text}")

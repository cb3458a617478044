"""The PostgreSQL schemas the tests make: named so that the ones a killed run left behind can be
dropped safely by a later run.

Every test gets a schema of its own (`tests/stores.py`) and drops it after; a run that is killed
(Ctrl-C twice, a timeout, an OOM kill) leaves its schemas behind. A name says who made it and when:

    nerve_test_<worker>_<owner>_<unix seconds>_<random>

`owner` is a random token per test process, which holds a session advisory lock named after it on a
connection of its own from before its first schema until it exits; PostgreSQL releases that lock
when the process dies, however it dies. At session start (`pytest_sessionstart` in conftest) a
schema is dropped only when it is older than `STALE_AFTER` *and* its owner's lock can be taken,
i.e. the process that made it is gone. So xdist workers, and other test runs against the same
server, never lose a schema they still use, and two cleaners at once take turns on the lock.
Names of another form (other projects, older runs) are left alone.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import secrets
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import psycopg

logger = logging.getLogger(__name__)

PREFIX = "nerve_test_"
STALE_AFTER = 3600.0
# The first key of the owners' advisory locks (nerve's own namespaces are 0x6E6572xx).
OWNER_LOCKS = 0x6E657454
NAME = re.compile(PREFIX + r"(?P<worker>[a-z0-9]+)_(?P<owner>[0-9a-f]{8})_(?P<created>\d{10})_[0-9a-f]{8}")

_owner = secrets.token_hex(4)
_held: psycopg.Connection[Any] | None = None
_holding = threading.Lock()


def owner_key(owner: str) -> tuple[int, int]:
    digest = hashlib.blake2b(owner.encode(), digest_size=4).digest()
    return OWNER_LOCKS, int.from_bytes(digest, "big", signed=True)


def hold_owner_lock(url: str) -> None:
    """Take this process's owner lock, once, on a connection kept until the process exits.

    Blocking (a connect at most once per process): call it through `asyncio.to_thread`.
    """
    global _held
    with _holding:
        if _held is not None and not _held.closed:
            return
        conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
        conn.execute("SELECT pg_advisory_lock(%s, %s)", owner_key(_owner))
        _held = conn
        atexit.register(conn.close)


def schema_name(now: float | None = None, *, owner: str | None = None) -> str:
    """A fresh schema name of this process (or of `owner`), made at `now`."""
    worker = re.sub(r"[^a-z0-9]", "", os.environ.get("PYTEST_XDIST_WORKER", "main").lower()) or "main"
    created = int(time.time() if now is None else now)
    return f"{PREFIX}{worker}_{owner or _owner}_{created:010d}_{uuid.uuid4().hex[:8]}"


def drop_stale_schemas(
    url: str, *, older_than: float = STALE_AFTER, now: Callable[[], float] = time.time
) -> list[str]:
    """Drop the test schemas older than `older_than` seconds whose process is gone; the ones dropped.

    Synchronous: it runs in `pytest_sessionstart`, before any event loop.
    """
    dropped: list[str] = []
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        # A schema some stuck session still locks is left for a later run rather than waited on.
        conn.execute("SET lock_timeout = '5s'")
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (PREFIX,)
        ).fetchall()
        stale: dict[str, list[str]] = defaultdict(list)
        for (name,) in rows:
            match = NAME.fullmatch(name)
            if match and now() - int(match["created"]) > older_than:
                stale[match["owner"]].append(name)
        for owner, names in stale.items():
            key = owner_key(owner)
            row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
            if not row or not row[0]:
                continue  # its process still runs (or another cleaner is at it)
            try:
                # Under the lock: another cleaner that held it before may have dropped them already.
                still = conn.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (names,)
                ).fetchall()
                for (name,) in still:
                    try:
                        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                        dropped.append(name)
                    except psycopg.Error as exc:
                        logger.warning("could not drop the stale test schema %s: %s", name, exc)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
    return dropped

"""A write transaction run whole on the SQLite connection's own thread: one hand-off, not one a statement.

aiosqlite runs each statement on the connection's thread and wakes the event loop with its result, so
a transaction of four statements is four trips through a loop that, with a hundred turns streaming
answers, may take milliseconds to come back each time; the store's one writer connection stays locked
through all of them, and every other turn's write queues behind. The ledgers' transactions are async
code written once for both stores; on SQLite their connection here answers every statement at once,
so the body never waits, and the whole transaction runs to its end in one call on the thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from typing import Any, TypeVar

import aiosqlite

from bot.store.dialect import Body

T = TypeVar("T")


class _OnThread:
    """The ledgers' `Connection` over the sqlite3 connection itself, used on its own thread only."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, parameters: Iterable[Any] = (), /) -> sqlite3.Cursor:
        return self._conn.execute(sql, tuple(parameters))

    async def execute_fetchall(self, sql: str, parameters: Iterable[Any] = (), /) -> list[Any]:
        return self._conn.execute(sql, tuple(parameters)).fetchall()

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> sqlite3.Cursor:
        return self._conn.executemany(sql, [tuple(row) for row in parameters])

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction


def _transaction(conn: sqlite3.Connection, body: Body[T]) -> T:
    """On the connection's thread: BEGIN IMMEDIATE, the body, COMMIT; ROLLBACK on any error."""
    steps = body(_OnThread(conn))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            steps.send(None)
        except StopIteration as done:
            if conn.in_transaction:  # the body may have ended it itself (ROLLBACK)
                conn.execute("COMMIT")
            return done.value  # type: ignore[no-any-return]
        raise RuntimeError("a store transaction waited on something other than its own statements")
    except BaseException:
        steps.close()
        # SQLite may have rolled back already (e.g. after a full disk); then nothing is left open.
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        raise


async def run_transaction(db: aiosqlite.Connection, body: Body[T]) -> T:
    """Queue the whole transaction on the connection's thread, behind whatever is queued there.

    The caller holds the connection's lock. Cancelled while it runs, the transaction still ends on
    the thread, committed or rolled back whole, before anything queued after it starts.
    """
    # aiosqlite has no public call for a function on its thread; `_execute` is the one its own
    # methods use (tests/test_store_round_trips.py fails at once if that changes).
    return await db._execute(_transaction, db._conn, body)  # type: ignore[no-untyped-call, no-any-return]

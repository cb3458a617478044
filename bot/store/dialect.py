"""What the store's ledgers need of a database (`Ledger`, the base of each), and the few spellings
SQLite and PostgreSQL differ on: the ledgers are written once, with `?` placeholders, in SQL both
run. Insertion order is `rowid` in both (an identity column of that name in the PostgreSQL schema).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...


class Connection(Protocol):
    """aiosqlite's, or psycopg's behind the adapter: in one transaction inside `_write()` only."""

    def execute(self, sql: str, parameters: Iterable[Any] = ..., /) -> Awaitable[Cursor]: ...

    def execute_fetchall(self, sql: str, parameters: Iterable[Any] = ..., /) -> Awaitable[list[Any]]: ...

    def executemany(self, sql: str, parameters: Iterable[Iterable[Any]], /) -> Awaitable[Cursor]: ...

    @property
    def in_transaction(self) -> bool: ...


# A ledger's write transaction (`Ledger._transaction`): what it does with the connection, and its result.
Body = Callable[[Connection], Coroutine[Any, Any, T]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    name: str
    # The current UTC time as ISO-8601 text with milliseconds, the format of every *_at TEXT column.
    now: str
    # The text of the event_id field of a parked turn's JSON `incoming` (NULL when absent).
    incoming_event_id: str


SQLITE = Dialect(
    name="sqlite",
    now="strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    incoming_event_id="json_extract(incoming, '$.event_id')",
)

POSTGRES = Dialect(
    name="postgres",
    now="to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
    incoming_event_id="(incoming::jsonb ->> 'event_id')",
)


def iso_utc(moment: datetime) -> str:
    """A time in the store's text format (`2026-01-31T12:00:00.000Z`), comparable as text."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def days_ago(days: float, now: datetime | None = None) -> str:
    """The store's text for `days` before `now` (by default the current time), to compare *_at with."""
    return iso_utc((now or datetime.now(UTC)) - timedelta(days=days))


class Ledger:
    """A group of tables; the store it is mixed into provides the connections and the dialect."""

    _sql: Dialect

    def _read(self) -> AbstractAsyncContextManager[Connection]:
        raise NotImplementedError

    def _write(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction, committed when the block ends, rolled back on any error; a store's
        writes are serialized, so a ledger may read and then write with no other writer in between."""
        raise NotImplementedError

    def _inbox(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for the inbox's single-statement writes, which never queue behind turns."""
        raise NotImplementedError

    def _write_one(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for ONE write statement, atomic on its own and reading nothing first. By
        default a write transaction; a store may run it without BEGIN and COMMIT, which on a store
        reached through a thread per statement saves two hand-offs on a path every request takes."""
        return self._write()

    async def _transaction(self, body: Body[T]) -> T:
        """`body` as one write transaction, as in `_write()`. A store may run the whole of it in one
        hand-off to its database, so the body awaits nothing but its own statements."""
        async with self._write() as db:
            return await body(db)

    def _read_one(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for ONE read statement, outside any transaction: it sees every write committed
        before it starts, and none in progress. By default `_read()`; a store may give it a connection
        of its own, so reads do not queue behind the writes of every turn in flight."""
        return self._read()

    async def _rows(self, sql: str, params: Sequence[Any] = (), *, inbox: bool = False) -> list[Any]:
        async with self._inbox() if inbox else self._read_one() as db:
            return await db.execute_fetchall(sql, params)

    async def _first(self, sql: str, params: Sequence[Any] = (), *, inbox: bool = False) -> Any | None:
        rows = await self._rows(sql, params, inbox=inbox)
        return rows[0] if rows else None

    async def _change(self, sql: str, params: Sequence[Any] = (), *, inbox: bool = False) -> int:
        """One statement in a write transaction of its own; the number of rows it changed."""
        if not inbox:
            return await self._transaction(lambda db: _rowcount(db, sql, params))
        async with self._inbox() as db:
            return (await db.execute(sql, params)).rowcount


async def _rowcount(db: Connection, sql: str, params: Sequence[Any]) -> int:
    return (await db.execute(sql, params)).rowcount

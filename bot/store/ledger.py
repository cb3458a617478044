"""The base of every ledger mixed into a store: how it reaches the database, whichever that is."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from bot.store.dialect import Connection, Dialect


class Ledger:
    """A group of tables; the store it is mixed into provides the connections and the dialect."""

    _sql: Dialect

    def _read(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for reads; each statement is its own transaction."""
        raise NotImplementedError

    def _write(self) -> AbstractAsyncContextManager[Connection]:
        """One write transaction, committed when the block ends, rolled back on any error.

        Writes of one store are serialized (SQLite's write lock, a PostgreSQL advisory lock), so a
        ledger may read and then write in one transaction without another writer in between.
        """
        raise NotImplementedError

    def _inbox(self) -> AbstractAsyncContextManager[Connection]:
        """A connection for the inbox's single-statement writes, which never queue behind turns."""
        raise NotImplementedError

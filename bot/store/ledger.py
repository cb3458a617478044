"""The base of every ledger mixed into a store: how it reaches the database, whichever that is."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from bot.store.dialect import Connection, Dialect
from bot.types import ChatMessage, ConversationKey


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

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read."""
        async with self._read() as db:
            return list(await db.execute_fetchall(sql, params))

    async def _first(self, sql: str, params: Sequence[Any] = ()) -> Any | None:
        """The first row of one read, or None."""
        rows = await self._rows(sql, params)
        return rows[0] if rows else None

    async def _change(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement in a write transaction of its own; the number of rows it changed."""
        async with self._write() as db:
            return (await db.execute(sql, params)).rowcount

    # Conversations (`bot.store.conversations`), which the approval and audit ledgers write into.
    async def _insert_messages(
        self,
        db: Connection,
        key: ConversationKey,
        messages: Sequence[ChatMessage],
        *,
        event_id: str | None = None,
    ) -> int:
        raise NotImplementedError

    async def _conversation_of(self, db: Connection, key: ConversationKey) -> int:
        raise NotImplementedError

"""Stored conversations as people manage them: listed, read back (archived ones too), deleted.

A thread holds one active conversation and any number archived by a reset. Deleting one removes
everything that holds its text in one transaction; its row stays, emptied and marked deleted,
because the approvals audit points at it and keeps who decided what, without text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from bot.store.dialect import Connection, Ledger, days_ago
from bot.store.rows import KEY_WHERE, MESSAGE_COLUMNS, columns, from_row, key_from_row, message_from_row
from bot.types import AuditEntry, ChatMessage, ConversationKey

_LAST_ACTIVITY = (
    "COALESCE((SELECT MAX(m.created_at) FROM messages m WHERE m.conversation_id = c.id), c.created_at)"
)
# A `StoredConversation`'s fields, in their order (the key's four columns as one).
_SUMMARY = (
    "SELECT c.id, c.platform, c.workspace, c.channel, c.thread, c.created_at,"
    f" {_LAST_ACTIVITY} AS last_activity,"
    " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), c.archived_at"
    " FROM conversations c"
)

# What holds a parked turn's text, by the column naming the turn; the turn's own row last.
PARKED_TABLES = (
    ("pending_calls", "request_id"),
    ("input_waits", "request_id"),
    ("sign_in_waits", "request_id"),
    ("input_requests", "parked_id"),
    ("parked_turns", "id"),
)

# What deleting one conversation did: `waiting` when a turn of it waits for a person (answer it or
# reset the thread first), `recent` when it was active again since the caller decided (retention).
Deletion = Literal["deleted", "missing", "waiting", "recent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredConversation:
    """One conversation of a thread, as `nerve threads` lists it. Times are the store's UTC text."""

    id: int
    key: ConversationKey
    started_at: str
    last_activity: str
    messages: int
    # When a reset archived it; None for the thread's active conversation.
    archived_at: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    message: ChatMessage
    at: str


class ThreadLedger(Ledger):
    """Listing, reading and deleting whole conversations, and pruning the ones idle too long."""

    async def stored_conversations(
        self, platform: str, workspace: str | None = None, *, archived: bool = False
    ) -> list[StoredConversation]:
        """Most recently active first; only the active one of each thread unless `archived`."""
        where = "c.deleted_at IS NULL AND c.platform = ? AND (CAST(? AS TEXT) IS NULL OR c.workspace = ?)"
        if not archived:
            where += " AND c.archived_at IS NULL"
        rows = await self._rows(
            f"{_SUMMARY} WHERE {where} ORDER BY last_activity DESC, c.id DESC",
            (platform, workspace, workspace),
        )
        return [_summary(row) for row in rows]

    async def stored_conversation(self, conversation_id: int) -> StoredConversation | None:
        row = await self._first(f"{_SUMMARY} WHERE c.id = ? AND c.deleted_at IS NULL", (conversation_id,))
        return _summary(row) if row else None

    async def stored_messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = await self._rows(
            f"SELECT {MESSAGE_COLUMNS}, created_at FROM messages WHERE conversation_id = ? ORDER BY seq",
            (conversation_id,),
        )
        return [StoredMessage(message=message_from_row(row[:-1]), at=str(row[-1])) for row in rows]

    async def conversation_audit(self, conversation_id: int) -> list[AuditEntry]:
        """The decisions on a conversation's tool calls, oldest first; kept after it is deleted."""
        rows = await self._rows(
            f"SELECT {columns(AuditEntry)} FROM audit WHERE conversation_id = ? ORDER BY id",
            (conversation_id,),
        )
        return [from_row(AuditEntry, row) for row in rows]

    async def delete_conversation(self, conversation_id: int, *, idle_before: str | None = None) -> Deletion:
        """In one transaction, under its turn lock; its audit stays. One whose turn waits for a person
        is refused (`waiting`); with `idle_before` (retention), one active since is kept (`recent`)."""
        async with self._write() as db:
            found = await db.execute_fetchall(
                "SELECT c.platform, c.workspace, c.channel, c.thread, c.created_at, c.archived_at,"
                f" {_LAST_ACTIVITY} FROM conversations c WHERE c.id = ? AND c.deleted_at IS NULL",
                (conversation_id,),
            )
            if not found:
                return "missing"
            *key, started, archived, last = found[0]
            if idle_before is not None and str(last) >= idle_before:
                return "recent"
            waiting = f"SELECT 1 FROM parked_turns WHERE {KEY_WHERE} AND status <> 'done' LIMIT 1"
            if archived is None and await db.execute_fetchall(waiting, key):
                return "waiting"
            await self._empty_conversation(db, conversation_id, key, started, archived)
        await self._write_back()
        return "deleted"

    async def _empty_conversation(
        self, db: Connection, conversation_id: int, key: Sequence[Any], started: str, archived: str | None
    ) -> int:
        """In the caller's transaction: the conversation's messages and everything of its thread in its
        lifetime that holds text go; its row stays, marked deleted. The number of items that waited
        (parked turns, deferred messages, tools' questions)."""
        # Parked turns, deferred messages and tools' questions are kept per thread, not per
        # conversation: this conversation's are those of the thread during its lifetime.
        # Strictly before the reset: what the next conversation wrote in that same millisecond is
        # not this one's.
        window = f"{KEY_WHERE} AND created_at >= ? AND (CAST(? AS TEXT) IS NULL OR created_at < ?)"
        span = (*key, started, archived, archived)
        parked = await db.execute_fetchall(f"SELECT id FROM parked_turns WHERE {window}", span)
        for table, column in PARKED_TABLES:
            await db.executemany(f"DELETE FROM {table} WHERE {column} = ?", parked)
        questions = await db.execute(f"DELETE FROM input_requests WHERE {window}", span)
        deferred_window = window.replace("created_at", "received_at")
        deferred = await db.execute(f"DELETE FROM deferred_messages WHERE {deferred_window}", span)
        await db.execute("DELETE FROM files WHERE conversation_id = ?", (conversation_id,))
        await db.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
        await db.execute(
            f"UPDATE conversations SET deleted_at = {self._sql.now},"
            f" archived_at = COALESCE(archived_at, {self._sql.now}) WHERE id = ?",
            (conversation_id,),
        )
        return len(parked) + max(questions.rowcount, 0) + max(deferred.rowcount, 0)

    async def _write_back(self) -> None:
        """After a deletion on SQLite: the deleted text is overwritten in the file (secure_delete) once
        the log is written back; until then the write-ahead log still holds it. Best effort: a reader
        in another process may keep part of the log, which the next checkpoint then clears."""
        if self._sql.name == "sqlite":
            async with self._read() as db:
                await db.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")

    async def idle_conversations(
        self, older_than_days: float, now: datetime | None = None
    ) -> list[StoredConversation]:
        """Conversations (active or archived, any platform) whose last activity is older than this."""
        cutoff = days_ago(older_than_days, now)
        rows = await self._rows(
            f"{_SUMMARY} WHERE c.deleted_at IS NULL AND {_LAST_ACTIVITY} < ? ORDER BY c.id", (cutoff,)
        )
        return [_summary(row) for row in rows]


def _summary(row: Sequence[Any]) -> StoredConversation:
    return from_row(StoredConversation, (row[0], key_from_row(row[1:5]), *row[5:]))

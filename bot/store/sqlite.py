"""The conversation store: SQLite through aiosqlite, in WAL mode (settings in `bot.store.connect`).

Every write is one `BEGIN IMMEDIATE` transaction, so a round (an assistant message with tool calls plus
its tool results) lands whole or not at all, and a model is never sent a tool call without its result.
Nothing about a thread is cached between calls: several processes may share the file, and each call
reads the thread's active conversation as it is now.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

import aiosqlite

from bot.errors import StoreError
from bot.store.approvals import ApprovalLedger
from bot.store.connect import connect, rollback, store_error
from bot.store.feedback import FeedbackLedger
from bot.store.inputs import InputLedger
from bot.store.migrate import migrate
from bot.store.sign_ins import SignInLedger
from bot.store.thread_lock import LEASE_SECONDS, SQLiteTurnLock
from bot.types import ChatMessage, ConversationKey, Role, ToolCall

BUSY_TIMEOUT_MS = 5000

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
_KEY = "platform = ? AND workspace = ? AND channel = ? AND thread = ?"
_MESSAGE_COLUMNS = "role, content, tool_calls, tool_call_id, name, is_error, latency_ms"
_C_KEY = "c.platform = ? AND c.workspace = ? AND c.channel = ? AND c.thread = ?"


class SQLiteStore(ApprovalLedger, FeedbackLedger, InputLedger, SignInLedger):
    """The `Store` seam on one SQLite file, plus the inbox adapters use for exactly-once replies, and
    the approval tables (`bot.store.approvals`)."""

    def __init__(
        self, db: aiosqlite.Connection, path: Path, inbox_db: aiosqlite.Connection, turn_lock: SQLiteTurnLock
    ) -> None:
        """Use `SQLiteStore.open`; this only wraps connections that are already set up."""
        self._db = db
        self._path = path
        # One connection is shared by every task, and its open transaction is visible to any statement
        # on it: reads take the lock too, so nobody sees (or writes into) another task's transaction.
        self._lock = asyncio.Lock()
        # The inbox has its own connection and lock: a platform's ack path records each delivery, and
        # must not queue behind the conversation writes of every turn in flight. Each inbox write is a
        # single statement, atomic on its own; SQLite's busy_timeout orders it with the other writer.
        self._inbox_db = inbox_db
        self._inbox_lock = asyncio.Lock()
        # Turns of one conversation, one at a time across every process on this file (its own connection).
        self.turn_lock = turn_lock
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        migrations_dir: Path | None = None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        turn_lease_seconds: float = LEASE_SECONDS,
    ) -> SQLiteStore:
        """Open (creating if needed) the database at `path` and bring its schema up to date.

        `turn_lease_seconds`: how long a turn of a process that stopped keeps its conversation locked.
        """
        try:
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for the conversation store {path}: {exc.strerror}"
            ) from exc
        db = await connect(path, busy_timeout_ms)
        opened = [db]
        try:
            await migrate(db, migrations_dir)
            opened.append(await connect(path, busy_timeout_ms))
            opened.append(await connect(path, busy_timeout_ms))
        except BaseException as exc:
            for connection in opened:
                await connection.close()
            if isinstance(exc, sqlite3.Error):
                raise store_error(exc, path) from exc
            raise
        inbox_db, lock_db = opened[1:]
        return cls(db, path, inbox_db, SQLiteTurnLock(lock_db, path, lease=turn_lease_seconds))

    async def close(self) -> None:
        """Close the connections; waits for a running write to finish."""
        async with self._lock, self._inbox_lock:
            if not self._closed:
                self._closed = True
                await self._db.close()
                await self._inbox_db.close()
                await self.turn_lock.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- conversations -------------------------------------------------------------------------

    async def append(
        self, key: ConversationKey, messages: Sequence[ChatMessage], *, event_id: str | None = None
    ) -> bool:
        """Persist messages in one transaction; False when `event_id` was already recorded.

        `event_id` belongs to the first message (the user's); a re-delivered event writes nothing.
        """
        if not messages:
            return True
        async with self._write() as db:
            if event_id is not None and await self._event_seen(db, key, event_id):
                await db.execute("ROLLBACK")
                return False
            await self._insert_messages(db, key, messages, event_id=event_id)
        return True

    async def _insert_messages(
        self,
        db: aiosqlite.Connection,
        key: ConversationKey,
        messages: Sequence[ChatMessage],
        *,
        event_id: str | None = None,
    ) -> int:
        """Append to the thread's active conversation inside the caller's transaction; returns its id."""
        # Looked up in this transaction, never cached: another process may have reset the thread
        # since this one last wrote to it, and the message belongs to the conversation now active.
        conversation = await self._active_conversation(db, key)
        # seq is computed by SQLite row by row, so a round costs one trip to the database thread.
        await db.executemany(
            "INSERT INTO messages (conversation_id, seq, role, content, tool_calls, tool_call_id, name,"
            " is_error, latency_ms, event_id) VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages"
            " WHERE conversation_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            [
                _message_row(conversation, message, event_id if index == 0 else None)
                for index, message in enumerate(messages)
            ],
        )
        return conversation

    async def _conversation_of(self, db: aiosqlite.Connection, key: ConversationKey) -> int:
        return await self._active_conversation(db, key)

    async def history(self, key: ConversationKey) -> list[ChatMessage]:
        """The current conversation of this thread, oldest first."""
        async with self._read() as db:
            rows = await db.execute_fetchall(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages JOIN conversations c ON c.id = conversation_id"
                f" WHERE c.archived_at IS NULL AND {_C_KEY}"
                " ORDER BY seq",
                _key_params(key),
            )
        return [_message_from_row(row) for row in rows]

    async def messages_after_event(self, key: ConversationKey, event_id: str) -> list[ChatMessage]:
        """The turn that answered the user message with this event id: what follows it, up to the next
        user message. Empty when the event is unknown. Lets a re-delivery resume or re-send its turn.
        """
        async with self._read() as db:
            found = list(
                await db.execute_fetchall(
                    "SELECT m.conversation_id, m.seq FROM messages m"
                    " JOIN conversations c ON c.id = m.conversation_id"
                    f" WHERE m.event_id = ? AND {_C_KEY} ORDER BY m.id DESC LIMIT 1",
                    (event_id, *_key_params(key)),
                )
            )
            if not found:
                return []
            conversation, seq = found[0]
            rows = await db.execute_fetchall(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages"
                " WHERE conversation_id = ? AND seq > ? AND seq < COALESCE("
                "  (SELECT MIN(seq) FROM messages WHERE conversation_id = ? AND seq > ? AND role = 'user'),"
                "  9223372036854775807)"
                " ORDER BY seq",
                (conversation, seq, conversation, seq),
            )
        return [_message_from_row(row) for row in rows]

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored but is no longer sent."""
        async with self._write() as db:
            await db.execute(
                f"UPDATE conversations SET archived_at = {_NOW} WHERE archived_at IS NULL AND {_KEY}",
                _key_params(key),
            )

    async def has_event(self, key: ConversationKey, event_id: str) -> bool:
        """Whether a message with this platform event id was stored in this thread (reset or not)."""
        async with self._read() as db:
            return await self._event_seen(db, key, event_id)

    async def conversations(self, platform: str | None = None) -> list[ConversationKey]:
        """Threads with an active conversation, most recently started first (for `nerve history`)."""
        where = "archived_at IS NULL" + (" AND platform = ?" if platform is not None else "")
        async with self._read() as db:
            rows = await db.execute_fetchall(
                f"SELECT platform, workspace, channel, thread FROM conversations WHERE {where}"
                " ORDER BY id DESC",
                (platform,) if platform is not None else (),
            )
        return [ConversationKey(platform=r[0], workspace=r[1], channel=r[2], thread=r[3]) for r in rows]

    # --- inbox ---------------------------------------------------------------------------------

    async def claim_event(self, platform: str, event_id: str, payload: str) -> bool:
        """Record a platform event before working on it; False if it was seen before (a re-delivery)."""
        async with (
            self._inbox() as db,
            db.execute(
                "INSERT INTO inbox (platform, event_id, payload) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (platform, event_id, payload),
            ) as cursor,
        ):
            return cursor.rowcount == 1

    async def finish_event(self, platform: str, event_id: str) -> None:
        """Mark an event answered, so start-up recovery does not answer it again.

        Its payload is emptied: recognising a re-delivery needs only the event id.
        """
        async with self._inbox() as db:
            await db.execute(
                f"UPDATE inbox SET status = 'done', done_at = {_NOW}, payload = '{{}}'"
                " WHERE platform = ? AND event_id = ? AND status = 'received'",
                (platform, event_id),
            )

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        """(event_id, payload) of events claimed but never finished, in the order they arrived."""
        async with self._inbox() as db:
            rows = await db.execute_fetchall(
                "SELECT event_id, payload FROM inbox WHERE platform = ? AND status = 'received'"
                " ORDER BY received_at, rowid",
                (platform,),
            )
        return [(str(row[0]), str(row[1])) for row in rows]

    async def prune_events(self, older_than_days: float) -> int:
        """Forget inbox events received more than `older_than_days` ago; returns how many.

        This bounds both windows: a re-delivery older than this is no longer recognised, and an
        unfinished event older than this is no longer recovered (answering it now would be stale).
        `bot.store.prune` runs this on a schedule with NERVE_INBOX_RETENTION_HOURS.
        """
        async with (
            self._inbox() as db,
            db.execute(
                "DELETE FROM inbox WHERE received_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)",
                (f"-{float(older_than_days)} days",),
            ) as cursor,
        ):
            return cursor.rowcount

    # --- plumbing ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            self._check_open()
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise store_error(exc, self._path) from exc

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction, committed on success and rolled back on any error or cancellation.

        The body may end the transaction itself (ROLLBACK for a no-op); commit only what is open.
        """
        async with self._lock:
            self._check_open()
            db = self._db
            try:
                await db.execute("BEGIN IMMEDIATE")
                yield db
                if db.in_transaction:
                    await db.execute("COMMIT")
            except BaseException as exc:
                # Always, not only when `in_transaction` says so: after a cancellation the statements
                # already queued on the connection's thread (BEGIN included) may not have run yet. The
                # ROLLBACK queues behind them and before any later statement, even if we are cancelled.
                await rollback(db)
                if isinstance(exc, sqlite3.Error):
                    raise store_error(exc, self._path) from exc
                raise

    @asynccontextmanager
    async def _inbox(self) -> AsyncIterator[aiosqlite.Connection]:
        """The inbox connection, in autocommit: each statement is its own transaction."""
        async with self._inbox_lock:
            self._check_open()
            try:
                yield self._inbox_db
            except sqlite3.Error as exc:
                raise store_error(exc, self._path) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the conversation store {self._path} is closed")

    @staticmethod
    async def _event_seen(db: aiosqlite.Connection, key: ConversationKey, event_id: str) -> bool:
        rows = await db.execute_fetchall(
            "SELECT 1 FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE m.event_id = ? AND {_C_KEY} LIMIT 1",
            (event_id, *_key_params(key)),
        )
        return bool(list(rows))

    @staticmethod
    async def _active_conversation(db: aiosqlite.Connection, key: ConversationKey) -> int:
        """The thread's active conversation, started now if it has none."""
        rows = list(
            await db.execute_fetchall(
                f"SELECT id FROM conversations WHERE archived_at IS NULL AND {_KEY}", _key_params(key)
            )
        )
        if rows:
            return int(rows[0][0])
        row = await db.execute_insert(
            "INSERT INTO conversations (platform, workspace, channel, thread) VALUES (?, ?, ?, ?)",
            _key_params(key),
        )
        assert row is not None
        return int(row[0])


def _key_params(key: ConversationKey) -> tuple[str, str, str, str]:
    return (key.platform, key.workspace, key.channel, key.thread)


def _message_row(conversation: int, message: ChatMessage, event_id: str | None) -> tuple[Any, ...]:
    tool_calls = (
        json.dumps(
            [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
            ensure_ascii=False,
        )
        if message.tool_calls
        else None
    )
    return (
        conversation,
        message.role,
        message.content,
        tool_calls,
        message.tool_call_id,
        message.name,
        int(message.is_error),
        message.latency_ms,
        event_id,
    )


def _message_from_row(row: Iterable[Any]) -> ChatMessage:
    role, content, tool_calls, tool_call_id, name, is_error, latency_ms = row
    calls = tuple(
        ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in json.loads(tool_calls or "[]")
    )
    return ChatMessage(
        role=cast(Role, role),
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        name=name,
        is_error=bool(is_error),
        latency_ms=latency_ms,
    )

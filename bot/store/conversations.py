"""Conversations per thread and the inbox of platform deliveries: the core tables of the store."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.dialect import Connection, Ledger, days_ago
from bot.store.rows import (
    C_KEY_WHERE,
    KEY_WHERE,
    MESSAGE_COLUMNS,
    key_from_row,
    key_params,
    message_from_row,
    message_row,
)
from bot.types import Author, ChatMessage, ConversationKey


class ConversationLedger(Ledger):
    """The `Store` seam: each thread's active conversation and its messages."""

    async def append(
        self,
        key: ConversationKey,
        messages: Sequence[ChatMessage],
        *,
        event_id: str | None = None,
        author: Author | None = None,
    ) -> bool:
        """In one transaction; False when `event_id` (the first, user's message's) was recorded before:
        a re-delivered event writes nothing. `author` wrote the first message, a user's: recorded with
        it, and whether its conversation is private, so the person's data can be found again."""
        if not messages:
            return True

        async def append(db: Connection) -> bool:
            if event_id is not None and await self._event_seen(db, key, event_id):
                await db.execute("ROLLBACK")
                return False
            await self._insert_messages(db, key, messages, event_id=event_id, author=author)
            return True

        return await self._transaction(append)

    async def _insert_messages(
        self,
        db: Connection,
        key: ConversationKey,
        messages: Sequence[ChatMessage],
        *,
        event_id: str | None = None,
        author: Author | None = None,
    ) -> None:
        """In the caller's transaction; `event_id` and `author` are the first message's."""
        private = None if author is None else int(author.private)
        conversation, known = await self._conversation_and_privacy(db, key, private)
        rows = [message_row(conversation, m, event_id if i == 0 else None) for i, m in enumerate(messages)]
        columns, marks = "", ""
        if author is not None:
            if known is None:
                await db.execute(
                    "UPDATE conversations SET private = ? WHERE id = ? AND private IS NULL",
                    (private, conversation),
                )
            # Only a user's message has an author: the first of the batch, when it is one.
            first = (author.person, author.user_id) if messages[0].role == "user" else (None, None)
            rows = [(*row, *(first if i == 0 else (None, None))) for i, row in enumerate(rows)]
            columns, marks = ", author, author_user", ", ?, ?"
        # seq is computed by the database row by row, so a round costs one batch.
        await db.executemany(
            "INSERT INTO messages (conversation_id, seq, role, content, tool_calls, tool_call_id, name,"
            f" is_error, latency_ms, files, event_id{columns}) VALUES (?, (SELECT COALESCE(MAX(seq), 0)"
            f" + 1 FROM messages WHERE conversation_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?{marks})",
            rows,
        )

    async def history(self, key: ConversationKey) -> list[ChatMessage]:
        rows = await self._rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages JOIN conversations c ON c.id = conversation_id"
            f" WHERE c.archived_at IS NULL AND {C_KEY_WHERE} ORDER BY seq",
            key_params(key),
        )
        return [message_from_row(row) for row in rows]

    async def messages_after_event(self, key: ConversationKey, event_id: str) -> list[ChatMessage]:
        """What followed this event's user message, through its answer: a re-delivery resumes its turn,
        or gets the answer it had. The answer is the first one after it (an assistant message without
        tool calls), past any user message stored in between: the model is sent the messages since
        the last answer together, so a message whose turn a stop cut off, followed by another, is
        answered with it and must not be answered again on its own. All that followed when no answer
        came yet."""
        found = await self._first(
            "SELECT m.conversation_id, m.seq FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE m.event_id = ? AND {C_KEY_WHERE} ORDER BY m.id DESC LIMIT 1",
            (event_id, *key_params(key)),
        )
        if found is None:
            return []
        conversation, seq = found
        rows = await self._rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages"
            " WHERE conversation_id = ? AND seq > ? AND seq <= COALESCE("
            "  (SELECT MIN(seq) FROM messages WHERE conversation_id = ? AND seq > ?"
            "   AND role = 'assistant' AND tool_calls IS NULL),"
            "  9223372036854775807)"
            " ORDER BY seq",
            (conversation, seq, conversation, seq),
        )
        return [message_from_row(row) for row in rows]

    async def holds_event(self, key: ConversationKey, event_id: str) -> bool:
        """Whether the user message of `event_id` is stored in the thread's conversation (a turn
        stopped while it waited for its turn has stored nothing)."""
        async with self._read() as db:
            return await self._event_seen(db, key, event_id)

    async def reset(self, key: ConversationKey) -> None:
        """The thread's next message starts a new conversation; the old one stays stored, not sent."""
        await self._change(
            f"UPDATE conversations SET archived_at = {self._sql.now}"
            f" WHERE archived_at IS NULL AND {KEY_WHERE}",
            key_params(key),
        )

    async def conversations(self, platform: str | None = None) -> list[ConversationKey]:
        """Threads with an active conversation, most recently started first (for `nerve history`)."""
        rows = await self._rows(
            "SELECT platform, workspace, channel, thread FROM conversations WHERE archived_at IS NULL"
            " AND (CAST(? AS TEXT) IS NULL OR platform = ?) ORDER BY id DESC",
            (platform, platform),
        )
        return [key_from_row(row) for row in rows]

    @staticmethod
    async def _event_seen(db: Connection, key: ConversationKey, event_id: str) -> bool:
        rows = await db.execute_fetchall(
            "SELECT 1 FROM messages m JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE m.event_id = ? AND {C_KEY_WHERE} LIMIT 1",
            (event_id, *key_params(key)),
        )
        return bool(rows)

    async def _conversation_of(self, db: Connection, key: ConversationKey) -> int:
        """Started now if the thread has none; never cached: another process may have reset the thread."""
        conversation, _ = await self._conversation_and_privacy(db, key, None)
        return conversation

    @staticmethod
    async def _conversation_and_privacy(
        db: Connection, key: ConversationKey, private: int | None
    ) -> tuple[int, int | None]:
        """The thread's conversation and whether it is private (None: not known yet); one started now
        is started as `private` says. Read with the id, so a user's message writes the flag only once:
        every turn's first write goes through here."""
        rows = await db.execute_fetchall(
            f"SELECT id, private FROM conversations WHERE archived_at IS NULL AND {KEY_WHERE}",
            key_params(key),
        ) or await db.execute_fetchall(
            "INSERT INTO conversations (platform, workspace, channel, thread, private) VALUES (?, ?, ?, ?, ?)"
            " RETURNING id, private",
            (*key_params(key), private),
        )
        conversation, known = rows[0]
        return int(conversation), None if known is None else int(known)


class InboxLedger(Ledger):
    """The `Inbox` seam: deliveries recorded before any work, for exactly-once replies."""

    async def claim_event(self, platform: str, event_id: str, payload: str) -> bool:
        """Record a platform event before working on it; False if it was seen before (a re-delivery)."""
        claimed = await self._change(
            "INSERT INTO inbox (platform, event_id, payload) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (platform, event_id, payload),
            inbox=True,
        )
        return claimed == 1

    async def finish_event(self, platform: str, event_id: str) -> None:
        """So start-up recovery does not answer it again; recognising a re-delivery needs no payload."""
        await self._change(
            f"UPDATE inbox SET status = 'done', done_at = {self._sql.now}, payload = '{{}}'"
            " WHERE platform = ? AND event_id = ? AND status = 'received'",
            (platform, event_id),
            inbox=True,
        )

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        rows = await self._rows(
            "SELECT event_id, payload FROM inbox WHERE platform = ? AND status = 'received'"
            " ORDER BY received_at, rowid",
            (platform,),
            inbox=True,
        )
        return [(str(row[0]), str(row[1])) for row in rows]

    async def unfinished_payload(self, platform: str, event_id: str) -> str | None:
        """None once the event is finished (or was never claimed): a job has nothing left to answer."""
        row = await self._first(
            "SELECT payload FROM inbox WHERE platform = ? AND event_id = ? AND status = 'received'",
            (platform, event_id),
            inbox=True,
        )
        return None if row is None else str(row[0])

    async def prune_events(self, older_than_days: float) -> int:
        """Older re-deliveries are no longer recognised, nor older unfinished events answered (stale)."""
        return await self._change(
            "DELETE FROM inbox WHERE received_at < ?", (days_ago(float(older_than_days)),), inbox=True
        )

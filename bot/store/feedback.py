"""Feedback on answers (thumbs up / down), kept next to the conversation it is about.

A person has one vote per answer: clicking the other button replaces it, and a click delivered twice
changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.store.ledger import Ledger
from bot.types import ConversationKey

Rating = Literal["up", "down"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """One person's vote on one answer."""

    key: ConversationKey
    message_ts: str
    user_id: str
    rating: Rating
    event_id: str | None = None


class FeedbackLedger(Ledger):
    """The feedback table of the conversation store (mixed into the store, `bot.store.base`)."""

    async def record_feedback(self, feedback: Feedback) -> None:
        """Keep a vote; the same person's earlier vote on that answer is replaced."""
        key = feedback.key
        async with self._write() as db:
            await db.execute(
                "INSERT INTO feedback"
                " (platform, workspace, channel, thread, message_ts, user_id, rating, event_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (platform, workspace, channel, message_ts, user_id)"
                " DO UPDATE SET rating = excluded.rating,"
                " event_id = COALESCE(excluded.event_id, feedback.event_id)",
                (
                    key.platform,
                    key.workspace,
                    key.channel,
                    key.thread,
                    feedback.message_ts,
                    feedback.user_id,
                    feedback.rating,
                    feedback.event_id,
                ),
            )

    async def feedback_in(self, key: ConversationKey) -> list[Feedback]:
        """The votes on the answers of one thread, oldest first."""
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT message_ts, user_id, rating, event_id FROM feedback"
                " WHERE platform = ? AND workspace = ? AND channel = ? AND thread = ?"
                " ORDER BY created_at, message_ts",
                (key.platform, key.workspace, key.channel, key.thread),
            )
        return [
            Feedback(
                key=key,
                message_ts=str(r[0]),
                user_id=str(r[1]),
                rating="up" if r[2] == "up" else "down",
                event_id=r[3],
            )
            for r in rows
        ]

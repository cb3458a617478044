"""Feedback on answers (thumbs up / down), kept next to the conversation it is about: one vote per
person and answer, so a click delivered twice changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.store.dialect import Ledger
from bot.store.rows import KEY_WHERE, from_row, key_params
from bot.types import ConversationKey

Rating = Literal["up", "down"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    key: ConversationKey
    message_ts: str
    user_id: str
    rating: Rating
    event_id: str | None = None


class FeedbackLedger(Ledger):
    async def record_feedback(self, feedback: Feedback) -> None:
        """Keep a vote; the same person's earlier vote on that answer is replaced."""
        await self._change(
            "INSERT INTO feedback"
            " (platform, workspace, channel, thread, message_ts, user_id, rating, event_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (platform, workspace, channel, message_ts, user_id)"
            " DO UPDATE SET rating = excluded.rating,"
            " event_id = COALESCE(excluded.event_id, feedback.event_id)",
            (
                *key_params(feedback.key),
                feedback.message_ts,
                feedback.user_id,
                feedback.rating,
                feedback.event_id,
            ),
        )

    async def feedback_in(self, key: ConversationKey) -> list[Feedback]:
        rows = await self._rows(
            f"SELECT message_ts, user_id, rating, event_id FROM feedback WHERE {KEY_WHERE}"
            " ORDER BY created_at, message_ts",
            key_params(key),
        )
        return [
            from_row(Feedback, (str(ts), str(user), "up" if rating == "up" else "down", event), key=key)
            for ts, user, rating, event in rows
        ]

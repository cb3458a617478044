"""Feedback on answers (thumbs up / down), kept next to the conversation it is about: one vote per
person and answer, so a click delivered twice changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.store.dialect import Ledger
from bot.store.rows import key_params
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

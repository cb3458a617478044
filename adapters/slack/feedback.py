"""Clicks on the thumbs up / down under a streamed answer, kept with the conversation they are about.

The buttons carry the rating and the question's delivery id; the click itself says who, where and on
which message. A click that cannot be read is logged and dropped: feedback never fails anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from adapters.slack.clicks import payload_field
from adapters.slack.events import PLATFORM
from bot.agent import Feedback
from bot.types import ConversationKey

logger = logging.getLogger(__name__)


@runtime_checkable
class FeedbackStore(Protocol):
    async def record_feedback(self, feedback: Feedback) -> None: ...


def parse_feedback(body: Mapping[str, Any]) -> Feedback | None:
    """The vote a `block_actions` body on the feedback buttons carries, or None if it is not one."""
    actions = body.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], Mapping) else {}
    value = payload_field(action, "value") or ""
    rating, _, event_id = value.partition("|")
    user = payload_field(body, "user", "id")
    team = payload_field(body, "team", "id") or payload_field(body, "user", "team_id")
    channel = payload_field(body, "container", "channel_id") or payload_field(body, "channel", "id")
    message_ts = payload_field(body, "container", "message_ts") or payload_field(body, "message", "ts")
    thread = payload_field(body, "container", "thread_ts") or payload_field(body, "message", "thread_ts")
    if rating not in ("up", "down") or not (user and team and channel and message_ts and thread):
        return None
    key = ConversationKey(platform=PLATFORM, workspace=team, channel=channel, thread=thread)
    return Feedback(
        key=key,
        message_ts=message_ts,
        user_id=user,
        rating="up" if rating == "up" else "down",
        event_id=event_id or None,
    )


async def record_click(store: FeedbackStore, body: Mapping[str, Any]) -> None:
    """Store one click (already acked)."""
    feedback = parse_feedback(body)
    if feedback is None:
        logger.warning("ignored a feedback click that could not be read")
        return
    try:
        await store.record_feedback(feedback)
    except Exception:
        logger.exception("could not store feedback on %s in %s", feedback.message_ts, feedback.key)

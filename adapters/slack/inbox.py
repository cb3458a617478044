"""What the inbox keeps of a Slack delivery: only what dedupe and replay at start-up need.

The event id recognises a re-delivery, and `classify` needs only the workspace and the event's type,
author, channel, time, thread and text; the entry keeps exactly those in the body's own shape (no
verification `token`, `authorizations` or blocks), so replay classifies it as a live delivery.
`migrations/0003_inbox_minimal_payloads.sql` reduces older entries to the same fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

BODY_FIELDS = ("type", "event_id", "team_id")
EVENT_FIELDS = (
    "type",
    "subtype",
    "user",
    "bot_id",
    "channel",
    "channel_type",
    "ts",
    "thread_ts",
    "text",
    "team",
)


def inbox_payload(body: Mapping[str, Any]) -> str:
    """The delivery reduced to the fields a replay needs, as JSON (ASCII: lone surrogates stay storable)."""
    kept: dict[str, Any] = {name: body[name] for name in BODY_FIELDS if name in body}
    event = body.get("event")
    if isinstance(event, Mapping):
        kept["event"] = {name: event[name] for name in EVENT_FIELDS if name in event}
    return json.dumps(kept)

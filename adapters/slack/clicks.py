"""Reading a Slack interaction payload: who clicked which button, on which message, in which thread.

Approvals and tools' questions both put buttons in a thread; their clicks arrive in the same
`block_actions` shape, read here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.text import scrub


def payload_field(body: Mapping[str, Any], *path: str) -> str | None:
    """A string (or number) at `path` in the payload, scrubbed; None when absent or empty."""
    value: Any = body
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return scrub(str(value)) if isinstance(value, str | int) and str(value) else None


@dataclass(frozen=True, slots=True)
class Click:
    """One button press: its action, who pressed it, and where its message is."""

    action: dict[str, Any]
    user: str | None
    channel: str | None
    thread: str | None
    message: str | None


def click_of(body: Mapping[str, Any]) -> Click:
    actions = body.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    return Click(
        action=action,
        user=payload_field(body, "user", "id"),
        channel=payload_field(body, "channel", "id") or payload_field(body, "container", "channel_id"),
        thread=payload_field(body, "message", "thread_ts") or payload_field(body, "container", "thread_ts"),
        message=payload_field(body, "message", "ts") or payload_field(body, "container", "message_ts"),
    )

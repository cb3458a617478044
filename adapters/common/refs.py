"""Where a message (an approval, a tool's question) is, as the store keeps it with its request, so
that any process can update it from there: `<channel>:<message>`."""

from __future__ import annotations


def message_ref(channel: str | int, message: str | int) -> str:
    return f"{channel}:{message}"


def parse_message_ref(ref: str | None) -> tuple[str, str] | None:
    """The channel and message a stored reference names; None when it names none."""
    channel, _, message = (ref or "").partition(":")
    return (channel, message) if channel and message else None

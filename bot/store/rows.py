"""How the store writes values as rows and JSON, and reads them back.

Its own module because a parked turn, a deferred message, the audit and the conversations export
all store the same values (messages, incoming messages, a thread's key, audit rows), and each must
be read back as it was written, whichever ledger wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from bot.policy.scopes import Place
from bot.types import (
    AuditEntry,
    ChatMessage,
    ConversationKey,
    Incoming,
    Role,
    ToolCall,
)

# A thread's key in a WHERE clause; `key_params` gives its parameters in this order.
KEY_WHERE = "platform = ? AND workspace = ? AND channel = ? AND thread = ?"


def key_params(key: ConversationKey) -> tuple[str, str, str, str]:
    return (key.platform, key.workspace, key.channel, key.thread)


# The audit's columns `audit_from_row` reads, in its order.
AUDIT_COLUMNS = "at, who, place, server, tool, call_id, arguments_hash, outcome"


def audit_from_row(row: Sequence[Any]) -> AuditEntry:
    """A row of AUDIT_COLUMNS as the decision it records."""
    at, who, place, server, tool, call_id, arguments_hash, outcome = row
    return AuditEntry(
        at=at,
        who=who,
        place=place,
        server=server,
        tool=tool,
        call_id=call_id,
        arguments_hash=arguments_hash,
        outcome=outcome,
    )


def message_to_json(message: ChatMessage) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
        "latency_ms": message.latency_ms,
    }


def message_from_json(data: dict[str, Any]) -> ChatMessage:
    return ChatMessage(
        role=cast(Role, data["role"]),
        content=data.get("content"),
        tool_calls=tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
            for c in data.get("tool_calls") or ()
        ),
        tool_call_id=data.get("tool_call_id"),
        name=data.get("name"),
        is_error=bool(data.get("is_error")),
        latency_ms=data.get("latency_ms"),
    )


def incoming_to_json(incoming: Incoming) -> dict[str, Any]:
    place = incoming.place
    return {
        "key": {
            "platform": incoming.key.platform,
            "workspace": incoming.key.workspace,
            "channel": incoming.key.channel,
            "thread": incoming.key.thread,
        },
        "text": incoming.text,
        "user_id": incoming.user_id,
        "user_name": incoming.user_name,
        "event_id": incoming.event_id,
        "place": None
        if place is None
        else {
            "platform": place.platform,
            "channel": place.channel,
            "guild": place.guild,
            "dm": place.dm,
            "user": place.user,
        },
    }


def incoming_from_json(data: dict[str, Any]) -> Incoming:
    place = data.get("place")
    return Incoming(
        key=ConversationKey(**data["key"]),
        text=data["text"],
        user_id=data["user_id"],
        user_name=data.get("user_name", ""),
        event_id=data.get("event_id"),
        place=None if place is None else Place(**place),
    )

"""How the store writes values as rows and JSON, and reads them back as they were written, whichever
ledger wrote them: parked turns, deferred messages, the audit and the export share these values."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any, TypeVar

from bot.policy.scopes import Place
from bot.types import ChatMessage, ConversationKey, Incoming, ToolCall

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

# A thread's key in a WHERE clause; `key_params` gives its parameters in this order.
KEY_WHERE = "platform = ? AND workspace = ? AND channel = ? AND thread = ?"
# The same, of the conversations table named `c`.
C_KEY_WHERE = "c." + KEY_WHERE.replace(" AND ", " AND c.")


def key_params(key: ConversationKey) -> tuple[str, str, str, str]:
    return (key.platform, key.workspace, key.channel, key.thread)


def key_from_row(row: Iterable[Any]) -> ConversationKey:
    """A thread's key from its four columns, in `KEY_WHERE`'s order."""
    platform, workspace, channel, thread = row
    return ConversationKey(platform=platform, workspace=workspace, channel=channel, thread=thread)


def columns(cls: type[DataclassInstance], prefix: str = "") -> str:
    """The columns named like the fields of `cls`, in their order, for `from_row`."""
    return ", ".join(prefix + field.name for field in fields(cls))


def from_row(cls: type[T], row: Iterable[Any], **given: Any) -> T:
    """A value from a row whose columns come in the order of its fields (those `given` left out)."""
    names = [field.name for field in fields(cls) if field.name not in given]
    return cls(**dict(zip(names, row, strict=True)), **given)


# The columns `message_from_row` reads, in its order.
MESSAGE_COLUMNS = "role, content, tool_calls, tool_call_id, name, is_error, latency_ms"


def to_json(value: Any) -> str | None:
    """JSON text as stored (non-ASCII kept as it is); None stays NULL."""
    return None if value is None else json.dumps(value, ensure_ascii=False)


def message_to_json(message: ChatMessage) -> dict[str, Any]:
    return asdict(message) | {"tool_calls": [asdict(call) for call in message.tool_calls]}


def message_from_json(data: dict[str, Any]) -> ChatMessage:
    calls = tuple(ToolCall(**call) for call in data.get("tool_calls") or ())
    return ChatMessage(**data | {"tool_calls": calls, "is_error": bool(data.get("is_error"))})


def message_row(conversation: int, message: ChatMessage, event_id: str | None) -> tuple[Any, ...]:
    """A message as the columns of `messages` (conversation, seq's subquery, MESSAGE_COLUMNS, event)."""
    data = message_to_json(message) | {"is_error": int(message.is_error)}
    data["tool_calls"] = to_json(data["tool_calls"] or None)
    return (conversation, conversation, *(data[name] for name in MESSAGE_COLUMNS.split(", ")), event_id)


def message_from_row(row: Iterable[Any]) -> ChatMessage:
    data = dict(zip(MESSAGE_COLUMNS.split(", "), row, strict=True))
    return message_from_json(data | {"tool_calls": json.loads(data["tool_calls"] or "[]")})


def incoming_to_json(incoming: Incoming) -> dict[str, Any]:
    data = asdict(incoming)
    del data["replayed"]  # a message answered after a restart is stored as it arrived
    return data


def incoming_from_json(data: dict[str, Any]) -> Incoming:
    place = data.get("place")
    return Incoming(**data | {"key": ConversationKey(**data["key"]), "place": place and Place(**place)})

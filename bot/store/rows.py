"""How the store writes values as rows and JSON, and reads them back as they were written, whichever
ledger wrote them: parked turns, deferred messages, the audit and the export share these values."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, fields, replace
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
MESSAGE_COLUMNS = "role, content, tool_calls, tool_call_id, name, is_error, latency_ms, files"


def to_json(value: Any) -> str | None:
    """JSON text as stored (non-ASCII kept as it is); None stays NULL."""
    return None if value is None else json.dumps(value, ensure_ascii=False)


def message_to_json(message: ChatMessage) -> dict[str, Any]:
    """Its images are for the model only, never stored (a file's own copy is, in `files`)."""
    data = asdict(message) | {"tool_calls": [asdict(call) for call in message.tool_calls]}
    del data["images"]
    return data | {"files": list(message.files)}


def message_from_json(data: dict[str, Any]) -> ChatMessage:
    calls = tuple(ToolCall(**call) for call in data.get("tool_calls") or ())
    files = tuple(data.get("files") or ())
    return ChatMessage(**data | {"tool_calls": calls, "is_error": bool(data.get("is_error")), "files": files})


def message_row(conversation: int, message: ChatMessage, event_id: str | None) -> tuple[Any, ...]:
    """A message as the columns of `messages` (conversation, seq's subquery, MESSAGE_COLUMNS, event)."""
    data = message_to_json(message) | {"is_error": int(message.is_error)}
    data["tool_calls"] = to_json(data["tool_calls"] or None)
    data["files"] = to_json(data["files"] or None)
    return (conversation, conversation, *(data[name] for name in MESSAGE_COLUMNS.split(", ")), event_id)


def message_from_row(row: Iterable[Any]) -> ChatMessage:
    data = dict(zip(MESSAGE_COLUMNS.split(", "), row, strict=True))
    loaded = {
        "tool_calls": json.loads(data["tool_calls"] or "[]"),
        "files": json.loads(data["files"] or "[]"),
    }
    return message_from_json(data | loaded)


def incoming_to_json(incoming: Incoming) -> dict[str, Any]:
    data = asdict(replace(incoming, files=()))
    del data["replayed"]  # a message answered after a restart is stored as it arrived
    # Its shared files are read (and kept) by the turn that takes it: their fetches are no JSON.
    del data["files"]
    return data


def incoming_from_json(data: dict[str, Any]) -> Incoming:
    place = data.get("place")
    return Incoming(**data | {"key": ConversationKey(**data["key"]), "place": place and Place(**place)})

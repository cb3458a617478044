"""A conversation's values: where it lives, what arrives, and the messages the model reads and writes.

Its own module because every layer speaks in these (the store persists them, the model client sends
them, the front ends build them), while none of them needs the tool, ask or turn values beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.policy.scopes import Place
from bot.types.files import SharedFile

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationKey:
    """Where a conversation lives: one thread on one platform (a DM, the user's DM channel, so one
    person's history is never loaded into another's)."""

    platform: str
    workspace: str
    channel: str
    thread: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace}:{self.channel}:{self.thread}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """A user's message, parsed from the platform payload at the adapter's edge."""

    key: ConversationKey
    text: str
    user_id: str
    user_name: str = ""
    # The platform's id for this delivery; the store uses it to make a re-delivered message a no-op.
    event_id: str | None = None
    # Where it was written, for scopes and remembered approvals; None: derived from the key.
    place: Place | None = None
    # Received before a restart and answered only now: it waits for a turn slot however long the
    # queue is, never told "busy" (its person already waited through the restart).
    replayed: bool = False
    # The schedule whose due slot started this turn (its id), None for a message a person wrote: the
    # front end says under the answer that it was a scheduled run and how to stop it.
    scheduled: str | None = None
    # The writer's time zone as their platform reports it (an IANA name from their profile), for a
    # front end that knows it; a zone the person set wins (`Agent.time_zone_of`).
    time_zone: str | None = None
    # Files shared with the message (images, documents), read by the core within its limits.
    files: tuple[SharedFile, ...] = ()

    def where(self) -> Place:
        """The place the policy sees: the adapter's, or the key's channel with this user."""
        return self.place or Place(platform=self.key.platform, channel=self.key.channel, user=self.user_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call as the model wrote it. `arguments` stays the raw JSON string the model sent."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of a conversation in the chat-completions shape; what the store records about a
    tool call (error flag, latency) never reaches the model."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    latency_ms: float | None = None
    # The stored files (`StoredFile.id`) shared with this user message, kept with it in the store.
    files: tuple[str, ...] = ()
    # Images shown with this message, as data URLs: sent to a model that can see, never stored.
    images: tuple[str, ...] = ()

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role}
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
        # An assistant message may have no content (null, beside its tool calls); every other one has text.
        out["content"] = self.content if self.role == "assistant" else self.content or ""
        if self.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": self.content or ""}]
            parts += [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
            out["content"] = parts
        if self.role == "assistant" and self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens one or more model requests used. `cached_tokens` is the part of the prompt the provider
    read from its cache (billed cheaper); `estimated`: counted here because the provider sent none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            estimated=self.estimated or other.estimated,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One answer from the model, with the usage the server reported (if it did)."""

    message: ChatMessage
    usage: Usage | None = None
    # The configured model that answered (a fallback when the primary failed); None when unnamed.
    model: str | None = None

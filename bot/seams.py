"""The seams the agent depends on. Each has a real implementation and a fake in tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bot.types import ChatMessage, Completion, ConversationKey, Progress, ToolResult, ToolSpec


class LLM(Protocol):
    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """One model call. Raises `LLMError` subclasses; reports retries through `progress`."""
        ...


class ToolHost(Protocol):
    def list_tools(self) -> list[ToolSpec]:
        """The tools offered to the model right now (enabled, with overrides applied)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a tool by its exposed name. Never raises for tool failures: they are data."""
        ...


class Store(Protocol):
    async def append(
        self, key: ConversationKey, messages: Sequence[ChatMessage], *, event_id: str | None = None
    ) -> bool:
        """Persist messages in one transaction; False when `event_id` was already recorded."""
        ...

    async def history(self, key: ConversationKey) -> list[ChatMessage]:
        """The current conversation of this thread, oldest first."""
        ...

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored but is no longer sent."""
        ...

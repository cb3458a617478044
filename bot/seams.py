"""The seams the agent depends on. Each has a real implementation and a fake in tests."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from bot.types import (
    Author,
    CallContext,
    ChatMessage,
    Completion,
    ConversationKey,
    Incoming,
    Progress,
    PromptSpec,
    Proposal,
    ToolResult,
    ToolSpec,
)


class LLM(Protocol):
    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """One model call. Raises `LLMError` subclasses; reports retries through `progress`."""


@runtime_checkable
class ModelChooser(Protocol):
    """An LLM made of several configured models (`bot.model.chain`): a place may name its own."""

    def choose(self, name: str | None) -> LLM:
        """The same models, asking `name` first (None: the configured order)."""


class ToolHost(Protocol):
    def list_tools(self) -> list[ToolSpec]:
        """The tools offered to the model right now (enabled, with overrides applied)."""

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        """Run a tool by its exposed name; never raises for tool failures: they are data. `context`:
        whom it runs for; `screened`: the spec it was checked against, run exactly or refused
        (`error_kind="changed"`)."""

    def starting(self) -> list[str]:
        """Servers still starting: their tools are not offered yet, and an answer should say so."""


@runtime_checkable
class ConfirmedTools(Protocol):
    """An in-process tool host some of whose calls act only on their person's own word (a schedule):
    such a call is checked first, then always held for its requester, whatever else is allowed."""

    def confirmed(self, spec: ToolSpec) -> bool:
        """Whether calls of this tool always wait for their requester's confirmation."""

    async def proposal(self, arguments: dict[str, Any], incoming: Incoming) -> Proposal | ToolResult:
        """What the person is asked to confirm, or the refusal the model reads at once."""


@runtime_checkable
class PromptNote(Protocol):
    """An in-process tool host with a line for the system prompt of each turn (the time now)."""

    async def prompt_note(self, incoming: Incoming) -> str: ...


@runtime_checkable
class PlacedTools(Protocol):
    """An in-process tool host offered only in some places: a schedule's tools where a front end
    runs schedules, so nobody confirms a reminder that would never fire."""

    def offered_in(self, incoming: Incoming) -> bool: ...


@runtime_checkable
class ServerStates(Protocol):
    """A host that can say which of its servers are connected (the real `MCPHost` is one)."""

    def server_states(self) -> dict[str, bool]: ...


@runtime_checkable
class PromptHost(Protocol):
    """The prompts servers offer (the real `MCPHost` is one; test hosts need not be)."""

    def list_prompts(self) -> list[PromptSpec]: ...

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        """The text the prompt starts a turn with; raises `PromptError`."""

    async def complete_prompt_argument(
        self, name: str, argument: str, value: str, known: dict[str, str] | None = None
    ) -> list[str]: ...


class Store(Protocol):
    async def append(
        self,
        key: ConversationKey,
        messages: Sequence[ChatMessage],
        *,
        event_id: str | None = None,
        author: Author | None = None,
    ) -> bool:
        """Persist messages in one transaction; False when `event_id` was already recorded. `author`
        wrote the first message (a user's), kept with it so their data can be found again."""

    async def history(self, key: ConversationKey) -> list[ChatMessage]:
        """The current conversation of this thread, oldest first."""

    async def messages_after_event(self, key: ConversationKey, event_id: str) -> list[ChatMessage]:
        """What was stored after the user message with this event id (to resume or re-send a turn)."""

    async def holds_event(self, key: ConversationKey, event_id: str) -> bool:
        """Whether the user message with this event id is stored in the thread's conversation."""

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored but is no longer sent."""


class Inbox(Protocol):
    """The ledger of platform deliveries: exactly one answer per event, also across restarts."""

    async def claim_event(self, platform: str, event_id: str, payload: str) -> bool:
        """Record a delivery; False when it was seen before (a re-delivery to ignore)."""

    async def finish_event(self, platform: str, event_id: str) -> None:
        """Mark the delivery answered, so a restart does not answer it again."""

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        """Deliveries recorded but not answered (event_id, payload), oldest first."""

    async def unfinished_payload(self, platform: str, event_id: str) -> str | None:
        """One delivery's payload while it is not answered; None once it is (or if never recorded)."""

    async def prune_events(self, older_than_days: float) -> int:
        """Forget deliveries received longer ago than that, answered or not; returns how many."""


@runtime_checkable
class PostRecords(Protocol):
    """Which parts of a turn's answer are out (`bot.store.posts`): a turn answered again edits or
    skips them instead of posting twice."""

    async def posts_of(self, turn: str) -> dict[str, str | None]:
        """Every part the turn announced: part → where it landed, or None while in doubt."""

    async def intend_post(self, turn: str, part: str) -> None: ...

    async def record_post(self, turn: str, part: str, ref: str) -> None: ...

    async def prune_posts(self, older_than_days: float) -> int:
        """Forget the posts of turns older than that; returns how many rows."""


class TurnLock(Protocol):
    """Turns of one conversation run one at a time, in arrival order, also across processes (SQLite:
    leased tickets, `bot.store.thread_lock`; PostgreSQL: advisory locks); a waiting turn holds no
    transaction."""

    def hold(self, key: ConversationKey) -> AbstractAsyncContextManager[None]:
        """Wait for the conversation's earlier turns, then hold it until the block ends."""


class SharedTurnLock(TurnLock, Protocol):
    """A store's turn lock, which every process on the store shares."""

    async def holder(self, key: ConversationKey) -> str | None:
        """The id of the turn holding `key`'s conversation in any process, None when none does."""

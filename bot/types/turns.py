"""What a turn gives back: its reply with one attachment per tool call, and the events on the way.

Its own module because these are what front ends show, and they gather every other kind of value
(tool results, approvals, asks) into the one answer of a turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.types.asks import ApprovalPrompt, Ask
from bot.types.conversation import Usage
from bot.types.tools import Resource


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One tool call of a turn, for people, as a collapsible detail: `content` is its result, or
    what went wrong, never the instructions the model got with a failure."""

    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    is_error: bool
    latency_ms: float
    summary: str
    content: str
    truncated: bool = False
    # Links to show as links, texts as their own collapsible details, files to upload.
    resources: tuple[Resource, ...] = ()
    # The server the call went to (or was meant for); None when no server was reached or known.
    server: str | None = None

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    @property
    def label(self) -> str:
        """The call's name with its server beside it, so people see where each call went."""
        return f"{self.name} · {self.server}" if self.server else self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class Remembered:
    """A memory a turn saved: what the reply confirms, and what its Undo forgets."""

    id: str
    text: str
    # "you" (the person) or "this place".
    owner: str
    # What the person should know of where it is used, if anything.
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentReply:
    """A platform-neutral answer: markdown text plus one attachment per tool call."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cut_short: bool = False
    # The model service failed: `text` is an apology, not an answer (scripts may exit non-zero).
    failed: bool = False
    # The thread has a turn waiting for a person; this message waits behind it (stored, not lost).
    deferred: bool = False
    # The turn is parked until people answer these (approvals, questions, links, sign-ins).
    waiting: tuple[Ask, ...] = ()
    # The memories this turn saved, in the order it saved them.
    remembered: tuple[Remembered, ...] = ()
    # The configured model that answered (the last round's): a fallback's name when the primary failed.
    model: str | None = None

    @property
    def approval(self) -> ApprovalPrompt | None:
        """The calls the parked turn waits for a decision on, if any (its "approval" ask)."""
        return next((ask.approval for ask in self.waiting if ask.approval is not None), None)


TurnEventKind = Literal[
    "thinking",
    "text",
    "tool_started",
    "tool_finished",
    "tool_progress",
    "retrying",
    "notice",
    "ask",
    "ask_done",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent:
    """Progress during a turn, for adapters to show ("calling get_environment_status…").

    "thinking": a model round starts, superseding text shown for an earlier one. "text": the next
    piece of the answer (`AgentReply.text` is what to keep). "tool_started" / "tool_finished" (`ok`)
    / "tool_progress" (`fraction` 0..1 when known): one call. "retrying" (`retry_in` s) and "notice":
    a status line. "ask": the turn asks a person something, of any kind (answered with `Agent.answer`);
    "ask_done": it ended, `message` saying how (take its buttons off; "completed" for a link's server
    finishing). Sinks are awaited in the turn's path: they should only record and return."""

    kind: TurnEventKind
    message: str
    tool: str | None = None
    tool_call_id: str | None = None
    ok: bool | None = None
    retry_in: float | None = None
    fraction: float | None = None
    server: str | None = None
    ask: Ask | None = None


Progress = Callable[[TurnEvent], Awaitable[None]]


async def no_progress(event: TurnEvent) -> None:
    """A Progress sink that shows nothing (one-shot runs, benchmarks)."""

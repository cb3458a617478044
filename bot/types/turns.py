"""What a turn gives back: its reply with one attachment per tool call, and the events on the way.

Its own module because these are what front ends show, and they gather every other kind of value
(tool results, approvals, asks) into the one answer of a turn.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.types.approvals import ApprovalPrompt
from bot.types.asks import Ask
from bot.types.conversation import Usage
from bot.types.tools import Resource


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One tool call of a turn, for the adapter to show as a collapsible detail.

    Everything here is for people: `content` is the tool's result, or for a failed call what went
    wrong; the instructions the model got with a failure ("call it again with …") are never here.
    """

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

    - "thinking": a model round starts; text shown for an earlier round is superseded (it was a
      draft next to tool calls, or one the model was asked to reconsider).
    - "text": `message` is the next piece of the answer as the model writes it; the pieces of one
      round joined are its text so far. The final `AgentReply.text` is what to keep.
    - "tool_started" / "tool_finished": one call (`tool`, `tool_call_id`, the `server` it goes to;
      `ok` when finished).
    - "tool_progress": a running call's server reported progress (`message`, `fraction` 0..1 when
      it knows the total).
    - "retrying" (`retry_in` seconds) and "notice": a status line for people.
    - "ask": the turn asks a person something (`ask`), whatever its kind: every approval, question,
      link and sign-in is announced this way, and answered with `Agent.answer`.
    - "ask_done": the ask `ask` ended, and `message` says how ("accepted", "declined",
      "cancelled", "expired", "ended"): take its buttons off, wherever it was answered. For a link,
      a later "ask_done" with `message` "completed" says the server finished what it was for.

    Sinks are awaited in the turn's path: they should only record and return (throttle elsewhere).
    """

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

"""A server's questions during a call (MCP elicitation) and the context a call runs in.

Its own module because the MCP host, the store's input ledger and the asks all share these shapes,
and a call's way back to its person (`CallContext`) is built from them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.forms import Form
from bot.types.conversation import ConversationKey, Incoming

InputMode = Literal["form", "url"]
InputAction = Literal["accept", "decline", "cancel"]
InputStatus = Literal["open", "accepted", "declined", "cancelled", "expired", "ended", "completed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputDraft:
    """What a server asked for during a call, before nerve shows it (MCP elicitation, either mode)."""

    message: str
    mode: InputMode
    schema: dict[str, Any] | None = None
    url: str | None = None
    # URL mode: the server's id, echoed in its completion notification.
    elicitation_id: str | None = None
    # The call(s) it may come from (see `bot.mcp.server_messages`).
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InputNeeded:
    """A call's server needs input before it can answer (2026-07-28): its questions by the server's
    keys, and the opaque state to send back with the answers when the call is made again."""

    request_state: str | None
    questions: tuple[tuple[str, InputDraft], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAnswer:
    """The reply a server gets: `content` only with "accept" in form mode."""

    action: InputAction
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequest:
    """A server's question as shown to people: only `user_id` (who started the turn) may answer.
    `tools`: the call(s) it may come from; `refused`: why nerve did not show it (already declined)."""

    request_id: str
    key: ConversationKey
    user_id: str
    server: str
    tools: tuple[str, ...]
    message: str
    mode: InputMode
    form: Form | None = None
    url: str | None = None
    refused: str | None = None
    expires_at: float = 0.0
    # Where the front end posted it (`Agent.ask_posted`), so any process can update that message.
    message_ref: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputOutcome:
    """What an answer did. `note` is for the person who answered only (ephemeral); `errors` holds a
    message per field when the form was refused as filled in (the form stays open)."""

    changed: bool
    request: InputRequest | None
    status: InputStatus | None = None
    note: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    # The parked turn this answer let go on: the front end resumes it (`Agent.resume`) and posts
    # the answer, as after the last approval click.
    resume: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputResume:
    """The answers to a parked call's questions, by the server's keys, and the state it gave."""

    request_state: str | None
    answers: tuple[tuple[str, InputAnswer], ...]


# A call's way back to the person: the server asks (`ask`), or reports progress (`report`:
# progress, total or None, message or None).
AskPerson = Callable[[InputDraft], Awaitable[InputAnswer]]
Report = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Who a tool call runs for, so what its server asks or reports mid-call reaches them."""

    tool: str
    # Calls of one owner (conversation and person) may share a question an older server cannot
    # attribute to one call; calls of different owners never do.
    owner: str
    # The person the call acts for, across conversations (`bot.mcp.auth.people.person_of`): whose
    # sign-in a per-person server's call uses. Empty: nobody's (the server's shared identity only).
    person: str = ""
    ask: AskPerson | None = None
    report: Report | None = None
    # The server finished what a link it asked people to open was for (URL mode): its id.
    completed: Callable[[str], Awaitable[None]] | None = None
    # A server that asks in its result (2026-07-28) may have the call parked (`ToolResult.needs_input`)
    # instead of asked while it waits; `resume` makes the call again with the answers.
    park: bool = False
    resume: InputResume | None = None
    # The message the call's turn answers: where and by whom (the built-in memory tools' scope).
    incoming: Incoming | None = None
    # The call runs because its person approved it as it was shown (a parked call, decided): a
    # built-in that acts only on its person's word (a schedule) refuses a call made without it.
    approved: bool = False

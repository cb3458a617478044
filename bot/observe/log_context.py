"""Which turn (and which MCP server) the running code belongs to, for log lines and traces.

A context variable set by `turn_context` names the conversation and turn in every line and span
inside it, without concurrent turns seeing each other's.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass

from bot.types import ConversationKey


@dataclass(frozen=True, slots=True)
class Turn:
    """The conversation (`platform:workspace:channel:thread`) and a short id for this one turn."""

    conversation: str
    id: str


_current: ContextVar[Turn | None] = ContextVar("nerve_turn", default=None)
_server: ContextVar[str | None] = ContextVar("nerve_mcp_server", default=None)


@contextmanager
def turn_context(key: ConversationKey) -> Iterator[Turn]:
    """Everything inside runs as one turn of `key`, with an id of its own."""
    # Short and random: enough to tell the turns of a log apart, never derived from what was said.
    turn = Turn(conversation=str(key), id=secrets.token_hex(4))
    token = _current.set(turn)
    try:
        yield turn
    finally:
        _current.reset(token)


current_turn = _current.get


def server_context(name: str) -> Context:
    """A copy of the context in which code runs for MCP server `name`, for its connection's tasks."""
    context = copy_context()
    context.run(_server.set, name)
    return context


current_server = _server.get


def fields(event: str, *, server: str | None = None) -> dict[str, str]:
    """`extra=` for a log line an operator may act on: its event name, and the server it is about."""
    return {"event": event} if server is None else {"event": event, "server": server}

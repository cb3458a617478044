"""Which turn the running code belongs to, for log lines and traces.

Many conversations are answered at once in one process, so a log line alone does not say which one
it is about. The core marks the start of a turn (and of a resumed one) with `turn_context`; every
line logged and every span started inside it, in tasks it starts too, can then name the
conversation and the turn. A context variable carries it, so concurrent turns never see each other's.

The same goes for an MCP server: what runs for one server's connection (its reader, the SDK's own
lines about its messages) names that server, so an operator can filter a log by server even for
lines nerve did not write. And a line an operator may act on carries a short `event` name (given
with `fields(...)`), stable across wording changes, for a log search to match on.
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


def new_turn_id() -> str:
    """Short and random: enough to tell the turns of a log apart, never derived from what was said."""
    return secrets.token_hex(4)


@contextmanager
def turn_context(key: ConversationKey) -> Iterator[Turn]:
    """Everything inside runs as one turn of `key`, with an id of its own."""
    turn = Turn(conversation=str(key), id=new_turn_id())
    token = _current.set(turn)
    try:
        yield turn
    finally:
        _current.reset(token)


def current_turn() -> Turn | None:
    """The turn the calling code runs in, or None outside any turn."""
    return _current.get()


def server_context(name: str) -> Context:
    """A copy of the current context in which code runs for MCP server `name`: give it to the
    server's connection task (`asyncio.create_task(..., context=...)`) and every task it starts."""
    context = copy_context()
    context.run(_server.set, name)
    return context


def current_server() -> str | None:
    """The MCP server the calling code runs for, or None."""
    return _server.get()


def fields(event: str, *, server: str | None = None) -> dict[str, str]:
    """`extra=` for a log line an operator may act on: its event name, and the server it is about
    when the code does not run for that server already."""
    extra = {"event": event}
    if server is not None:
        extra["server"] = server
    return extra

"""Which call a server's mid-call request belongs to, so its question reaches the right person.

A 2026-07-28 server asks for input in the result of the call itself, and the SDK answers it in the
calling task: the call's context travels with it exactly (`current`). An older server sends
`elicitation/create` on the connection, which says nothing about the call it came from: if every
call in flight on that server runs for one owner (one person in one conversation), the question is
theirs and names every such call; if calls of several owners are in flight, nobody can be asked
safely and the server is answered "cancel".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count

from bot.types import CallContext

_current: ContextVar[CallContext | None] = ContextVar("nerve_mcp_call", default=None)


class Callers:
    """The calls in flight on one server."""

    def __init__(self) -> None:
        self._active: dict[int, CallContext] = {}
        self._ids = count()

    @contextmanager
    def running(self, context: CallContext) -> Iterator[None]:
        """Mark a call in flight for the duration of the block (in the task that makes it)."""
        call_id = next(self._ids)
        self._active[call_id] = context
        token = _current.set(context)
        try:
            yield
        finally:
            _current.reset(token)
            del self._active[call_id]

    def route(self) -> tuple[CallContext, tuple[str, ...]] | None:
        """Whom a request from the server is for, and the calls it may come from; None if unknown."""
        exact = _current.get()
        if exact is not None:
            return exact, (exact.tool,)
        active = list(self._active.values())
        if not active or len({c.owner for c in active}) != 1:
            return None
        tools = tuple(dict.fromkeys(c.tool for c in active))
        asking = next((c for c in active if c.ask is not None), active[0])
        return asking, tools

"""What a server sends over its connection unasked (questions, log lines, notices), and whose call
a question belongs to: a 2026-07-28 server's travels with the call (`_current`); an older server's
names no call, so it goes to the one owner of every call in flight, or is answered "cancel"."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import mcp_types
from mcp.client.session import ClientRequestContext

from bot.types import CallContext, InputDraft

logger = logging.getLogger(__name__)

# MCP's syslog levels that Python's logging has no name for.
_LOG_LEVELS = {"notice": logging.INFO, "alert": logging.CRITICAL, "emergency": logging.CRITICAL}
# Links people agreed to open whose completion is awaited, at most (completions may never come).
MAX_URL_WAITERS = 100
_current: ContextVar[CallContext | None] = ContextVar("nerve_mcp_call", default=None)


class Callers:
    def __init__(self) -> None:
        self._active: list[CallContext] = []

    @contextmanager
    def running(self, context: CallContext) -> Iterator[None]:
        """Mark a call in flight for the duration of the block (in the task that makes it)."""
        self._active.append(context)
        token = _current.set(context)
        try:
            yield
        finally:
            _current.reset(token)
            self._active.remove(context)

    def route(self) -> tuple[CallContext, tuple[str, ...]] | None:
        """Whom a request from the server is for, and the calls it may come from; None if unknown."""
        if (exact := _current.get()) is not None:
            return exact, (exact.tool,)
        active = list(self._active)
        if not active or len({c.owner for c in active}) != 1:
            return None
        tools = tuple(dict.fromkeys(c.tool for c in active))
        return next((c for c in active if c.ask is not None), active[0]), tools


class ServerMessages:
    """The handlers a server's client is given: for its questions, its log lines and its notices."""

    def __init__(self, name: str, callers: Callers, on_lists_changed: Callable[[], None]) -> None:
        self.name = name
        self._callers = callers
        self._on_lists_changed = on_lists_changed
        # Links people agreed to open, by elicitation id: the server says when it is done with each.
        self._url_waiters: dict[str, Callable[[str], Awaitable[None]]] = {}
        self._server_log = logging.getLogger(f"bot.mcp.server.{name}")

    async def on_elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The server asks for input mid-call: ask the person the call runs for, or cancel."""
        routed = self._callers.route()
        if routed is None or routed[0].ask is None:
            why = "no call of one person is running" if routed is None else "nobody can answer it here"
            logger.info("MCP server %r asked for input, answered cancel: %s", self.name, why)
            return mcp_types.ElicitResult(action="cancel")
        call, tools = routed
        assert call.ask is not None
        draft = draft_of(params, tools)
        answer = await call.ask(draft)
        if answer.action == "accept" and params.mode == "url" and params.elicitation_id and call.completed:
            self._url_waiters[params.elicitation_id] = call.completed
            while len(self._url_waiters) > MAX_URL_WAITERS:  # completions are not guaranteed to come
                self._url_waiters.pop(next(iter(self._url_waiters)))
        content = answer.content if answer.action == "accept" and draft.mode == "form" else None
        return mcp_types.ElicitResult(action=answer.action, content=content)

    async def on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """Server logging goes to nerve's log under the server's name, never into a conversation."""
        named = logging.getLevelNamesMapping().get(params.level.upper(), logging.INFO)
        level = _LOG_LEVELS.get(params.level, named)
        data = params.data if isinstance(params.data, str) else repr(params.data)
        source = f" [{params.logger}]" if params.logger else ""
        self._server_log.log(level, "%s%s", data[:2000], source)

    async def on_message(self, message: object) -> None:
        if isinstance(
            message, mcp_types.ToolListChangedNotification | mcp_types.PromptListChangedNotification
        ):
            self._on_lists_changed()
        elif isinstance(message, mcp_types.ElicitCompleteNotification):
            if (done := self._url_waiters.pop(message.params.elicitation_id, None)) is not None:
                await done(message.params.elicitation_id)
        elif isinstance(message, Exception):
            logger.debug("MCP server %r: transport error: %s", self.name, message)


def draft_of(params: mcp_types.ElicitRequestParams, tools: tuple[str, ...]) -> InputDraft:
    """A server's question (either mode), as nerve shows it."""
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return InputDraft(
            message=params.message,
            mode="url",
            url=params.url,
            elicitation_id=params.elicitation_id,
            tools=tools,
        )
    return InputDraft(message=params.message, mode="form", schema=dict(params.requested_schema), tools=tools)

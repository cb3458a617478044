"""What a server sends over its connection unasked: questions for people, log lines, notices.

Its own module because each has its own way on (a question to the person whose call is running,
a log line to the server's own logger, a "lists changed" to the link, a finished link to whoever
waits for it), apart from keeping the connection alive.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import mcp_types
from mcp.client.session import ClientRequestContext

from bot.mcp.callers import Callers
from bot.types import InputDraft

logger = logging.getLogger(__name__)

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
# Links people agreed to open whose completion is awaited, at most (completions may never come).
MAX_URL_WAITERS = 100


class ServerMessages:
    """The handlers a server's client is given: for its questions, its log lines and its notices."""

    def __init__(self, name: str, callers: Callers, on_lists_changed: Callable[[], None]) -> None:
        self.name = name
        # The calls in flight, so what the server asks mid-call reaches the person it is for.
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
        level = _LOG_LEVELS.get(params.level, logging.INFO)
        data = params.data if isinstance(params.data, str) else repr(params.data)
        source = f" [{params.logger}]" if params.logger else ""
        self._server_log.log(level, "%s%s", data[:2000], source)

    async def on_message(self, message: object) -> None:
        if isinstance(
            message, mcp_types.ToolListChangedNotification | mcp_types.PromptListChangedNotification
        ):
            self._on_lists_changed()
        elif isinstance(message, mcp_types.ElicitCompleteNotification):
            done = self._url_waiters.pop(message.params.elicitation_id, None)
            if done is not None:
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

"""One tool call on one server's link, with every way it can fail turned into a `ToolResult`.

A 2026-07-28 server's questions come back as `InputNeeded`, so the turn parks holding nothing
instead of waiting for a person; the resumed call is made again with the answers."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
import mcp_types
import pydantic
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.jsonrpc import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from bot.mcp import results
from bot.mcp.link import ServerLink
from bot.mcp.server_messages import draft_of
from bot.types import CallContext, InputAnswer, InputDraft, InputNeeded, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

# What the SDK's Streamable HTTP client says for a non-2xx answer without a JSON-RPC error in it.
HTTP_ERROR_STAND_IN = "Server returned an error response"
MAX_INPUT_ROUNDS = 10
# The SDK's frozen answer to a state it cannot open, expired or not its own (`mcp.server.request_state`).
STATE_REFUSED = "invalid_request_state"
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 0.25


class CallTimer:
    """Moves one call's cancel-scope deadline as the call progresses."""

    def __init__(self, scope: anyio.CancelScope, *, idle: float, most: float, spent: float = 0.0) -> None:
        self.scope = scope
        self._idle = idle
        self._most = most
        # The server's own time so far (seconds), not counting time spent waiting for people.
        self._spent = spent
        self._since = time.monotonic()
        self._asking = 0

    def restart(self) -> None:
        """Progress or an answer arrived: the idle timeout starts again, within the overall bound."""
        if self._asking:
            return
        self.scope.deadline = anyio.current_time() + max(0.0, min(self._idle, self._most - self._working()))

    def out_of_time(self) -> bool:
        return self._working() >= self._most - 0.001

    def _working(self) -> float:
        return self._spent if self._asking else self._spent + time.monotonic() - self._since

    def watch(self, context: CallContext) -> CallContext:
        """The context with its `ask` wrapped: the clock stops while a person answers."""
        if (ask := context.ask) is None:
            return context

        async def paused(draft: InputDraft) -> InputAnswer:
            if not self._asking:
                self._spent += time.monotonic() - self._since
            self._asking += 1
            self.scope.deadline = math.inf
            try:
                return await ask(draft)
            finally:
                self._asking -= 1
                if not self._asking:
                    self._since = time.monotonic()
                self.restart()

        return replace(context, ask=paused)

    def progress_callback(self, context: CallContext) -> ProgressFnT:
        report = context.report

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.restart()
            if report is not None:
                await report(progress, total, message)

        return on_progress


@dataclass(frozen=True, slots=True)
class Call:
    """One call as asked; its latencies count from `started` (`time.perf_counter`)."""

    spec: ToolSpec
    name: str
    arguments: dict[str, Any]
    context: CallContext | None
    started: float

    def elapsed(self) -> float:
        return (time.perf_counter() - self.started) * 1000


@dataclass(frozen=True, slots=True)
class LinkCalls:
    """Calls on links; `still_offered` finds a restarted server's live spec, or why not to call."""

    max_call_seconds: float
    still_offered: Callable[[ToolSpec], ToolSpec | ToolResult]

    async def call(self, link: ServerLink, made: Call) -> ToolResult:
        """One call through the server's circuit; a forgotten session (HTTP 404) is renewed once."""
        spec = made.spec
        probe = link.circuit.admit()
        if isinstance(probe, str):
            return results.unavailable(spec.server, probe, latency_ms=made.elapsed())
        result: ToolResult | None = None
        try:
            stale = link.client
            result = await self._once(link, made)
            if link.session_expired and stale is not None and result.error_kind == "unavailable":
                result = await self._renewed(link, stale, made)
        finally:
            # A probe call settles the circuit: answered (even with a tool error) means the server is back.
            link.circuit.settle(
                probe, answered=None if result is None else result.error_kind != "unavailable"
            )
        return result

    async def _renewed(self, link: ServerLink, stale: Client, made: Call) -> ToolResult:
        """The call again on a new session; the server never ran it on the one it had forgotten."""
        spec = made.spec
        logger.info("MCP server %r forgot the session; opening a new one for %s", spec.server, made.name)
        if await link.renew_session(stale, within=spec.timeout) is None:
            reason = "it forgot the session and a new one could not be opened in time"
            return results.unavailable(spec.server, reason, latency_ms=made.elapsed())
        result = await self._once(link, made)
        if link.session_expired and result.error_kind == "unavailable":
            reason = "it forgot the session again right after a new one was opened"
            return replace(result, content=results.unavailable(spec.server, reason).content, detail=reason)
        return result

    async def _once(self, link: ServerLink, made: Call) -> ToolResult:
        spec, name, arguments, elapsed = made.spec, made.name, made.arguments, made.elapsed

        def down(reason: str) -> ToolResult:
            return results.unavailable(spec.server, reason, latency_ms=elapsed())

        client = link.client
        if client is None and link.refused is not None:
            return down(link.refused)
        if client is None:
            # Restarting after a crash: wait for it within the call's own timeout.
            if (client := await link.wait_ready(within=spec.timeout)) is None:
                return down(f"{link.problem or 'it stopped'}; it is being restarted")
            # A restarted server lists its tools anew: still the definition the call was checked against?
            still = self.still_offered(spec) if spec.definition_hash else spec
            if isinstance(still, ToolResult):
                return replace(still, latency_ms=elapsed())
        scope = anyio.CancelScope()
        timer = CallTimer(scope, idle=spec.timeout, most=self.max_call_seconds, spent=elapsed() / 1000)
        context = timer.watch(made.context or CallContext(tool=name, owner=""))
        try:
            # Leaving the scope on timeout cancels the request, which sends notifications/cancelled.
            with scope, link.callers.running(context):
                timer.restart()
                on_progress = timer.progress_callback(context)
                if (context.park or context.resume) and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    outcome = await call_parkable(client, spec.original_name, arguments, context, on_progress)
                    if isinstance(outcome, InputNeeded):
                        return ToolResult(content="", needs_input=outcome, latency_ms=elapsed())
                    answer = outcome
                else:
                    answer = await client.call_tool(
                        spec.original_name, arguments, progress_callback=on_progress
                    )
            if scope.cancelled_caught:
                limit = self.max_call_seconds if timer.out_of_time() else spec.timeout
                return results.timed_out(name, limit, latency_ms=elapsed())
        except MCPError as exc:
            if link.session_expired:
                return down("it forgot the session")
            if link.http_failure is not None and exc.error.message == HTTP_ERROR_STAND_IN:
                # The SDK's words for any non-2xx answer: the status says more (a gateway's 502).
                return down(f"it answered {link.http_failure}")
            return _protocol_error(spec, exc, elapsed(), remote=link.config.kind != "stdio")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return down("the connection to it was lost")
        except RuntimeError as exc:
            if link.client is not client:  # the session closed under the call
                return down("the connection to it was lost")
            # e.g. structured content that breaks the tool's own output schema
            return results.failed(name, str(exc), latency_ms=elapsed())
        except pydantic.ValidationError as exc:
            logger.warning("MCP server %r sent a malformed result for %s: %s", spec.server, name, exc)
            return results.failed(
                name, "the service sent an answer that could not be read", latency_ms=elapsed()
            )
        except Exception as exc:  # the seam's promise: tool failures are data
            logger.exception("MCP call %s on %r failed unexpectedly", name, spec.server)
            return results.failed(name, f"{type(exc).__name__}: {exc}", latency_ms=elapsed())
        link.note_success()
        return results.from_call_result(answer, latency_ms=elapsed())


def _protocol_error(spec: ToolSpec, exc: MCPError, latency_ms: float, *, remote: bool) -> ToolResult:
    """A JSON-RPC error instead of a result: the server could not run the call at all."""
    code = exc.error.code
    if code == CONNECTION_CLOSED:
        # A remote server may well be running: what failed is the connection (reset, answer cut off).
        reason = (
            "the connection to it broke during the call" if remote else "it stopped while handling the call"
        )
        return results.unavailable(spec.server, reason, latency_ms=latency_ms)
    if code == REQUEST_TIMEOUT:
        return results.timed_out(spec.name, spec.timeout, latency_ms=latency_ms)
    if code == INVALID_PARAMS:
        return results.failed(spec.name, exc.error.message, kind="arguments", latency_ms=latency_ms)
    kind, retry_after = results.classify_error(exc.error.message)
    failure = results.failed(spec.name, exc.error.message, kind=kind, latency_ms=latency_ms)
    return replace(failure, retry_after=retry_after)


async def call_parkable(
    client: Client, name: str, arguments: dict[str, Any], context: CallContext, on_progress: ProgressFnT
) -> mcp_types.CallToolResult | InputNeeded:
    """The call's result, or (when `context.park`) the questions it must wait for."""
    session = client.session
    state: str | None = None
    responses: dict[str, mcp_types.InputResponse] | None = None
    if context.resume is not None:
        state = context.resume.request_state
        responses = {
            key: mcp_types.ElicitResult(action=answer.action, content=answer.content)
            for key, answer in context.resume.answers
        }
    delay = _BACKOFF_FIRST
    for _ in range(MAX_INPUT_ROUNDS):
        try:
            result = await session.call_tool(
                name,
                arguments,
                progress_callback=on_progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            if state is None or not state_refused(exc):
                raise
            logger.info("the server of %s no longer takes its state; sending the answers without it", name)
            state = None
            continue
        if not isinstance(result, mcp_types.InputRequiredResult):
            if not isinstance(result, mcp_types.CallToolResult):
                raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the server sent an unexpected result")
            return result
        state = result.request_state
        if not (requests := result.input_requests or {}):
            await anyio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)
            responses = None
            continue
        delay = _BACKOFF_FIRST
        if context.park and all(isinstance(r, mcp_types.ElicitRequest) for r in requests.values()):
            questions = tuple(
                (key, draft_of(request.params, (context.tool,)))
                for key, request in requests.items()
                if isinstance(request, mcp_types.ElicitRequest)
            )
            return InputNeeded(request_state=state, questions=questions)
        responses = {}
        for key, request in requests.items():
            meta = request.params.meta if request.params else None
            asked = ClientRequestContext(session=session, request_id=key, meta=meta)
            answer = await session.dispatch_input_request(asked, request)
            if isinstance(answer, mcp_types.ErrorData):
                raise MCPError.from_error_data(answer)
            responses[key] = answer
    raise RuntimeError(f"the server asked for input more than {MAX_INPUT_ROUNDS} times in one call")


def state_refused(exc: MCPError) -> bool:
    """Whether the server refused the `requestState` it was sent (expired, another process's)."""
    data = exc.error.data
    reason = data.get("reason") if isinstance(data, Mapping) else None
    refused = reason == STATE_REFUSED or "requeststate" in exc.error.message.lower()
    return exc.error.code == mcp_types.INVALID_PARAMS and refused

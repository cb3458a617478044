"""nerve's figures for Prometheus: turns, model requests, tool calls, waits for people, servers.

Each metric lives once in `Metrics` (`bot.observe.figures`) on nerve's own registry, so a test's
`reset()` reads exactly its run; label values stay bounded, so no server can grow `/metrics`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from prometheus_client.exposition import choose_encoder

from bot.errors import ContextTooLong, LLMError, LLMRateLimited, StreamCut
from bot.observe.figures import (
    MAX_SERVERS,
    OTHER,
    QUESTION_OUTCOMES,
    SCHEDULE_RUN_OUTCOMES,
    TURN_OUTCOMES,
    Metrics,
    clean_label,
)
from bot.observe.live_state import Breaker, Gate, Waiting, live
from bot.types import AgentReply, ApprovalPrompt, Completion, InputRequest, PendingCall, ToolResult, Usage

_current = Metrics()


def reset() -> Metrics:
    """Start counting afresh on a new registry (a test's run); the process's live state stays."""
    global _current
    _current = Metrics()
    live.approvals = Waiting()
    live.questions = Waiting()
    return _current


def exposition(accept: str = "") -> tuple[bytes, str]:
    encode, content_type = choose_encoder(accept)
    return encode(_current.registry), content_type


# --- turns -------------------------------------------------------------------------------------

Turn = TypeVar("Turn", bound=Callable[..., Awaitable[AgentReply]])


@dataclass
class _TurnNote:
    task: asyncio.Task[Any] | None
    outcome: str | None = None


_turn: contextvars.ContextVar[_TurnNote | None] = contextvars.ContextVar("nerve_turn", default=None)


def turn(run: Turn) -> Turn:
    """Count and time a turn; a turn run inside another in the same task is part of the outer one."""

    @functools.wraps(run)
    async def counted(*args: Any, **kwargs: Any) -> AgentReply:
        task = asyncio.current_task()
        outer = _turn.get()
        if outer is not None and outer.task is task:
            return await run(*args, **kwargs)
        note = _TurnNote(task=task)
        token = _turn.set(note)
        started = time.perf_counter()
        outcome = "failed"
        try:
            reply = await run(*args, **kwargs)
            outcome = note.outcome or _outcome_of(reply)
            return reply
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            _turn.reset(token)
            surface = _current.platforms.label(_surface_of(args))
            _current.turns.labels(surface, outcome).inc()
            _current.turn_seconds.labels(surface).observe(time.perf_counter() - started)

    return cast(Turn, counted)


def turn_outcome(outcome: str) -> None:
    """How the running turn ends, where its reply alone cannot tell (busy, too long, parked)."""
    note = _turn.get()
    if note is not None and outcome in TURN_OUTCOMES:
        note.outcome = outcome


def _outcome_of(reply: AgentReply) -> str:
    if any(ask.kind == "approval" for ask in reply.waiting):
        return "parked"
    if reply.deferred:
        return "deferred"
    if reply.failed:
        return "failed"
    if reply.cut_short:
        return "cut_off"
    return "answered"


def _surface_of(args: Sequence[Any]) -> str:
    """The platform of the turn's conversation: an argument's `key`, or its `incoming.key`."""
    for arg in args:
        key = getattr(arg, "key", None) or getattr(getattr(arg, "incoming", None), "key", None)
        platform = getattr(key, "platform", None)
        if isinstance(platform, str):
            return platform
    return "unknown"


# --- the model -----------------------------------------------------------------------------------

Request = TypeVar("Request", bound=Callable[..., Awaitable[Any]])
# How a request that raised is counted, first match wins (anything else: "error").
_MODEL_FAILURES: tuple[tuple[type[BaseException], str], ...] = (
    (asyncio.CancelledError, "cancelled"),
    (ContextTooLong, "context_too_long"),
    (StreamCut, "cut_off"),
    (LLMError, "failed"),
)


def model_request(attempt: Request) -> Request:
    """Count and time each request to the model service, with the tokens of each answer; the model
    is the `name` of the client the request is made by (its first argument)."""

    @functools.wraps(attempt)
    async def counted(*args: Any, **kwargs: Any) -> Any:
        name = getattr(args[0], "name", None) if args else None
        model = _current.models.label(name) if isinstance(name, str) else OTHER
        outcome = "error"
        with _current.model_seconds.time():
            try:
                result = await attempt(*args, **kwargs)
                outcome = _model_outcome(result)
                return result
            except BaseException as exc:
                outcome = next((name for kind, name in _MODEL_FAILURES if isinstance(exc, kind)), outcome)
                raise
            finally:
                _current.model_requests.labels(model, outcome).inc()

    return cast(Request, counted)


def _model_outcome(result: object) -> str:
    if isinstance(result, Completion):
        return "ok"
    if result is None:
        return "refused_option"
    return "rate_limited" if isinstance(getattr(result, "error", None), LLMRateLimited) else "unavailable"


def model_usage(model: str, usage: Usage, cost: float | None) -> None:
    """The tokens of one answered request (estimated ones too: they are what budgets count)."""
    label = _current.models.label(model)
    _current.tokens.labels(label, "prompt").inc(usage.prompt_tokens)
    _current.tokens.labels(label, "completion").inc(usage.completion_tokens)
    _current.tokens.labels(label, "cached").inc(usage.cached_tokens)
    _current.cached_tokens.labels(label).inc(usage.cached_tokens)
    if cost is not None:
        _current.cost.labels(label).inc(cost)


# --- tools and servers ---------------------------------------------------------------------------


def tool_call(server: str, tool: str, result: ToolResult) -> None:
    """One call answered by (or failed at) its server: `tool` is its name on that server."""
    server_label = _current.servers.label(server)
    tool_label = _current.tools.label(tool, scope=server_label)
    outcome = "asked" if result.needs_input is not None else "ok" if not result.is_error else None
    outcome = outcome or result.error_kind or "execution"
    _current.tool_calls.labels(server_label, tool_label, outcome).inc()
    _current.tool_seconds.labels(server_label, tool_label).observe(result.latency_ms / 1000)


def server_up(server: str, up: bool) -> None:
    name = clean_label(server)
    if name in live.servers or len(live.servers) < MAX_SERVERS:
        live.servers[name] = up


def server_restart(server: str) -> None:
    _current.restarts.labels(_current.servers.label(server)).inc()


def watch_circuit(server: str, breaker: Breaker) -> None:
    """A server link's circuit, shown per server while the link exists."""
    name = clean_label(server)
    if name in live.circuits or len(live.circuits) < MAX_SERVERS:
        live.circuits.setdefault(name, weakref.WeakSet()).add(breaker)


def forget_circuit(server: str, breaker: Breaker) -> None:
    live.circuits.get(clean_label(server), set()).discard(breaker)


def rate_limit_wait(platform: str, seconds: float) -> None:
    """Someone (a chat platform, the model, an MCP server) asked nerve to slow down; it waited `seconds`."""
    label = _current.platforms.label(platform)
    _current.rate_limit_waits.labels(label).inc()
    _current.rate_limit_seconds.labels(label).inc(max(0.0, seconds))


def watch_gate(gate: Gate) -> None:
    """The turn gate whose running and queued turns the gauges show (the newest one made)."""
    live.gate = weakref.ref(gate)


# --- people: approvals and questions --------------------------------------------------------------


def approval_parked(prompt: ApprovalPrompt) -> None:
    if prompt.calls:
        live.approvals.add(prompt.request_id, prompt.expires_at)


def approvals_decided(count: int, approve: bool) -> None:
    if count:
        _current.approvals.labels("approved" if approve else "denied").inc(count)


def approval_resumed(request_id: str, calls: Sequence[PendingCall]) -> None:
    """A parked turn goes on: it no longer waits, and its calls nobody decided on expired."""
    live.approvals.drop(request_id)
    if expired := sum(1 for call in calls if call.status == "expired"):
        _current.approvals.labels("expired").inc(expired)


def question_waiting(request: InputRequest) -> None:
    """A tool's question was shown to its person (one nerve refused to show waits for nobody)."""
    if request.refused is None:
        live.questions.add(request.request_id, request.expires_at)


def question_settled(request_id: str) -> None:
    """A question was answered or closed; its call learns how (and is counted) where it goes on."""
    live.questions.drop(request_id)


def question_ended(status: str, request_id: str | None = None) -> None:
    if request_id is not None:
        live.questions.drop(request_id)
    _current.questions.labels(status if status in QUESTION_OUTCOMES else OTHER).inc()


# --- schedules -----------------------------------------------------------------------------------


def schedules_active(count: int) -> None:
    """How many schedules are active, as a runner just found them."""
    _current.schedules_active.set(count)


def schedule_run(outcome: str) -> None:
    """One slot settled: answered or failed after its run, or missed (never run)."""
    _current.schedule_runs.labels(outcome if outcome in SCHEDULE_RUN_OUTCOMES else OTHER).inc()


def schedule_lateness(seconds: float) -> None:
    """A scheduled run started `seconds` after its slot."""
    _current.schedule_lateness.observe(max(0.0, seconds))

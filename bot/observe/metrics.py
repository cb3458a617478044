"""nerve's figures for Prometheus: turns, model requests, tool calls, waits for people, servers.

Every metric is defined once, in `Metrics`, on a registry nerve owns rather than prometheus-client's
global default: nothing another library registers leaks into `/metrics`, and a test can start a run
with `reset()` and read exactly that run's figures. The core records each fact with one call of a
function below, at the point that already knows it; nothing here knows a platform.

Two kinds of figures live here. Counters and histograms add up what happened since the process (or
the run, after `reset()`) started. Gauges of the present (which MCP servers are up, turns running and
queued, approvals and questions waiting) are read from live state when `/metrics` is scraped; that
state belongs to the process, so `reset()` keeps it (all but what waits for people).

Label values stay bounded: outcomes are fixed words, and names that come from outside (servers, the
tools they list, platforms) are cleaned to `[A-Za-z0-9_.:-]`, cut to 64 characters and capped in
number (past the cap they count as "other"), so a server that invents tool names cannot grow
`/metrics` without end.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from bot.errors import ContextTooLong, LLMError, LLMRateLimited, StreamCut
from bot.types import AgentReply, ApprovalPrompt, Completion, InputRequest, PendingCall, ToolResult

# Seconds. A turn includes every model request and tool call of it (not time waiting for people).
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

LABEL_CHARS = 64
MAX_SERVERS = 64
MAX_TOOLS_PER_SERVER = 100
MAX_PLATFORMS = 16
OTHER = "other"
# Things waiting for people that one process keeps track of (the oldest are forgotten past this).
MAX_WAITING = 10_000

TURN_OUTCOMES = frozenset(
    {
        "answered",
        "failed",
        "timed_out",
        "refused_busy",
        "refused_too_long",
        "parked",
        "deferred",
        "cut_off",
        "cancelled",
    }
)
QUESTION_OUTCOMES = frozenset(
    {"accepted", "declined", "cancelled", "expired", "ended", "completed", "refused"}
)

# The `_created` series (when each labelled counter first appeared) only double what /metrics shows:
# nerve is the only user of prometheus-client in its process, so this global switch is its to turn.
disable_created_metrics()  # type: ignore[no-untyped-call]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def clean_label(value: str) -> str:
    """A name from outside as a label value: safe characters only, at most LABEL_CHARS long."""
    return _UNSAFE.sub("_", value)[:LABEL_CHARS] or "_"


class _Names:
    """Label values seen so far, per scope; past `cap` distinct values a scope answers OTHER."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._seen: dict[str, set[str]] = {}

    def label(self, value: str, scope: str = "") -> str:
        value = clean_label(value)
        seen = self._seen.setdefault(scope, set())
        if value in seen:
            return value
        if len(seen) >= self._cap:
            return OTHER
        seen.add(value)
        return value


class Metrics:
    """The figures of one run, on their own registry (with the live gauges of the process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter(
            "nerve_turns", "Turns by front end and how they ended.", ["surface", "outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "nerve_turn_seconds",
            "How long turns took (a parked turn: until it parked, then again once it goes on).",
            ["surface"],
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.model_requests = Counter(
            "nerve_model_requests", "Requests to the model service by outcome.", ["outcome"], registry=r
        )
        self.model_seconds = Histogram(
            "nerve_model_request_seconds",
            "How long one request to the model service took.",
            buckets=MODEL_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "nerve_model_tokens", "Tokens the model service counted, by kind.", ["kind"], registry=r
        )
        self.tool_calls = Counter(
            "nerve_tool_calls",
            "Tool calls that reached an MCP server, by outcome.",
            ["server", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "nerve_tool_call_seconds",
            "How long tool calls took.",
            ["server", "tool"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.approvals = Counter(
            "nerve_approval_decisions", "Tool calls decided on by people or expiry.", ["outcome"], registry=r
        )
        self.questions = Counter(
            "nerve_questions", "Questions from tools, by how they ended.", ["outcome"], registry=r
        )
        self.rate_limit_waits = Counter(
            "nerve_rate_limit_waits", "Rate-limit waits, by who asked for them.", ["platform"], registry=r
        )
        self.rate_limit_seconds = Counter(
            "nerve_rate_limit_wait_seconds",
            "Seconds spent waiting out rate limits.",
            ["platform"],
            registry=r,
        )
        self.restarts = Counter(
            "nerve_mcp_server_restarts", "Times an MCP server was started again.", ["server"], registry=r
        )
        self.servers = _Names(MAX_SERVERS)
        self.tools = _Names(MAX_TOOLS_PER_SERVER)
        self.platforms = _Names(MAX_PLATFORMS)
        r.register(_LiveGauges())
        # CPU, memory, open files and start time of the process (where /proc exists).
        ProcessCollector(registry=r)


@dataclass
class _Waiting:
    """Ids of things waiting for people, until settled in this process or past their expiry."""

    until: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, expires_at: float) -> None:
        self.until[key] = expires_at
        while len(self.until) > MAX_WAITING:
            self.until.pop(next(iter(self.until)))

    def drop(self, key: str) -> bool:
        return self.until.pop(key, None) is not None

    def count(self) -> int:
        now = time.time()
        for key in [k for k, expires_at in self.until.items() if expires_at <= now]:
            del self.until[key]
        return len(self.until)


class _Breaker(Protocol):
    """A server link's circuit (`bot.mcp.circuit.Circuit`), read when /metrics is scraped."""

    @property
    def state(self) -> str: ...


# How a circuit's state reads as a number: the worst of a server's links is shown.
CIRCUIT_LEVELS = {"closed": 0.0, "half_open": 1.0, "open": 2.0}


class _Gate(Protocol):
    @property
    def running(self) -> int: ...

    @property
    def waiting(self) -> int: ...


@dataclass
class _Live:
    """The present state of this process, read when /metrics is scraped."""

    servers: dict[str, bool] = field(default_factory=dict)
    # Each server's circuits: the shared link's, and one per person for a per-person server.
    circuits: dict[str, weakref.WeakSet[_Breaker]] = field(default_factory=dict)
    gate: weakref.ref[_Gate] | None = None
    approvals: _Waiting = field(default_factory=_Waiting)
    questions: _Waiting = field(default_factory=_Waiting)


_live = _Live()


class _LiveGauges(Collector):
    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "nerve_mcp_server_up", "1 while an MCP server is connected.", labels=["server"]
        )
        for name, ready in sorted(_live.servers.items()):
            up.add_metric([name], 1.0 if ready else 0.0)
        yield up
        circuit = GaugeMetricFamily(
            "nerve_mcp_circuit_state",
            "Calls to an MCP server: 0 allowed, 1 one probe call allowed, 2 paused after repeated failures.",
            labels=["server"],
        )
        for name, breakers in sorted(_live.circuits.items()):
            levels = [CIRCUIT_LEVELS.get(breaker.state, 0.0) for breaker in list(breakers)]
            circuit.add_metric([name], max(levels, default=0.0))
        yield circuit
        gate = _live.gate() if _live.gate is not None else None
        yield GaugeMetricFamily(
            "nerve_turns_running", "Turns holding a slot right now.", value=gate.running if gate else 0
        )
        yield GaugeMetricFamily(
            "nerve_turn_queue_depth", "Turns waiting for a free slot.", value=gate.waiting if gate else 0
        )
        yield GaugeMetricFamily(
            "nerve_approvals_waiting",
            "Approval requests this process parked that wait for a decision.",
            value=_live.approvals.count(),
        )
        yield GaugeMetricFamily(
            "nerve_questions_waiting",
            "Questions from tools this process showed that wait for an answer.",
            value=_live.questions.count(),
        )


_current = Metrics()


def current() -> Metrics:
    return _current


def reset() -> Metrics:
    """Start counting afresh on a new registry (a test's run). What waits for people is forgotten
    with the figures; which servers are up and the turn gate are the process's, and stay."""
    global _current
    _current = Metrics()
    _live.approvals = _Waiting()
    _live.questions = _Waiting()
    return _current


def exposition(accept: str = "") -> tuple[bytes, str]:
    """The current figures in the format the scraper asked for (Prometheus text unless it asks for
    OpenMetrics), with its content type."""
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
    """Count and time a turn (`Agent.reply`, a parked turn going on). A turn run inside another in
    the same task (a parked turn that goes on at once) is part of the outer one."""

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
    if reply.approval is not None:
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


def model_request(attempt: Request) -> Request:
    """Count and time each request to the model service, with the tokens of each answer. The wrapped
    call returns a `Completion`, None (the service refused an option; asked again without it) or a
    failure worth retrying (its `error` says which); failures that end the turn raise."""

    @functools.wraps(attempt)
    async def counted(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await attempt(*args, **kwargs)
            outcome = _model_outcome(result)
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except ContextTooLong:
            outcome = "context_too_long"
            raise
        except StreamCut:
            outcome = "cut_off"
            raise
        except LLMError:
            outcome = "failed"
            raise
        finally:
            _current.model_requests.labels(outcome).inc()
            _current.model_seconds.observe(time.perf_counter() - started)

    return cast(Request, counted)


def _model_outcome(result: object) -> str:
    if isinstance(result, Completion):
        if result.usage is not None:
            _current.tokens.labels("prompt").inc(result.usage.prompt_tokens)
            _current.tokens.labels("completion").inc(result.usage.completion_tokens)
        return "ok"
    if result is None:
        return "refused_option"
    error = getattr(result, "error", None)
    return "rate_limited" if isinstance(error, LLMRateLimited) else "unavailable"


def model_wait(error: LLMError, seconds: float) -> None:
    """The model client waits before a retry: a rate-limit wait when the service said 429."""
    if isinstance(error, LLMRateLimited):
        rate_limit_wait("model", seconds)


# --- tools and servers ---------------------------------------------------------------------------


def tool_call(server: str, tool: str, result: ToolResult) -> None:
    """One call answered by (or failed at) its server: `tool` is its name on that server."""
    server_label = _current.servers.label(server)
    tool_label = _current.tools.label(tool, scope=server_label)
    if result.needs_input is not None:
        outcome = "asked"
    elif not result.is_error:
        outcome = "ok"
    else:
        outcome = result.error_kind or "execution"
    _current.tool_calls.labels(server_label, tool_label, outcome).inc()
    _current.tool_seconds.labels(server_label, tool_label).observe(result.latency_ms / 1000)


def server_up(server: str, up: bool) -> None:
    """An MCP server connected (True) or went away (False)."""
    name = clean_label(server)
    if name in _live.servers or len(_live.servers) < MAX_SERVERS:
        _live.servers[name] = up


def server_restart(server: str) -> None:
    """An MCP server is being started again after it stopped or failed to start."""
    _current.restarts.labels(_current.servers.label(server)).inc()


def watch_circuit(server: str, breaker: _Breaker) -> None:
    """A server link's circuit, shown per server while the link exists."""
    name = clean_label(server)
    if name in _live.circuits or len(_live.circuits) < MAX_SERVERS:
        _live.circuits.setdefault(name, weakref.WeakSet()).add(breaker)


def forget_circuit(server: str, breaker: _Breaker) -> None:
    """A server link closed: its circuit no longer counts."""
    breakers = _live.circuits.get(clean_label(server))
    if breakers is not None:
        breakers.discard(breaker)


def rate_limit_wait(platform: str, seconds: float) -> None:
    """Someone (slack, discord, model, mcp) asked nerve to slow down, and it waited `seconds`."""
    label = _current.platforms.label(platform)
    _current.rate_limit_waits.labels(label).inc()
    _current.rate_limit_seconds.labels(label).inc(max(0.0, seconds))


def watch_gate(gate: _Gate) -> None:
    """The turn gate whose running and queued turns the gauges show (the newest one made)."""
    _live.gate = weakref.ref(gate)


# --- people: approvals and questions --------------------------------------------------------------


def approval_parked(prompt: ApprovalPrompt) -> None:
    """A turn parked with calls that wait for a decision."""
    if prompt.calls:
        _live.approvals.add(prompt.request_id, prompt.expires_at)


def approvals_decided(count: int, approve: bool) -> None:
    """A person approved or denied `count` calls with one click."""
    if count:
        _current.approvals.labels("approved" if approve else "denied").inc(count)


def approval_resumed(request_id: str, calls: Sequence[PendingCall]) -> None:
    """A parked turn goes on: it no longer waits, and its calls nobody decided on expired."""
    _live.approvals.drop(request_id)
    expired = sum(1 for call in calls if call.status == "expired")
    if expired:
        _current.approvals.labels("expired").inc(expired)


def question_waiting(request: InputRequest) -> None:
    """A tool's question was shown to its person (one nerve refused to show waits for nobody)."""
    if request.refused is None:
        _live.questions.add(request.request_id, request.expires_at)


def question_settled(request_id: str) -> None:
    """A question was answered or closed; its call learns how (and is counted) where it goes on."""
    _live.questions.drop(request_id)


def question_ended(status: str, request_id: str | None = None) -> None:
    """The call that asked learnt how its question ended."""
    if request_id is not None:
        _live.questions.drop(request_id)
    _current.questions.labels(status if status in QUESTION_OUTCOMES else OTHER).inc()

"""Every figure nerve keeps, defined once on a registry nerve owns, with label values kept bounded."""

from __future__ import annotations

import functools
import re

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from bot.observe.live_state import LiveGauges

# Seconds. A turn includes every model request and tool call of it (not time waiting for people).
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
MODEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
# Seconds a scheduled run started after its slot: on time is under a minute, a restart's late run
# up to the grace (an hour by default).
LATENESS_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

LABEL_CHARS = 64
MAX_SERVERS = 64
MAX_TOOLS_PER_SERVER = 100
MAX_PLATFORMS = 16
MAX_MODELS = 16
OTHER = "other"

# fmt: off
TURN_OUTCOMES = frozenset({
    "answered", "failed", "timed_out", "refused_busy", "refused_too_long", "parked", "deferred", "cut_off",
    "cancelled", "refused_budget",
})
# fmt: on
SCHEDULE_RUN_OUTCOMES = frozenset({"answered", "failed", "missed", "handed_on"})
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
        if value not in seen and len(seen) >= self._cap:
            return OTHER
        seen.add(value)
        return value


class Metrics:
    """The figures of one run, on their own registry (with the live gauges of the process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter = functools.partial(Counter, registry=self.registry)
        histogram = functools.partial(Histogram, registry=self.registry)
        self.turns = counter("nerve_turns", "Turns by front end and how they ended.", ["surface", "outcome"])
        self.turn_seconds = histogram(
            "nerve_turn_seconds",
            "How long turns took (a parked turn: until it parked, then again once it goes on).",
            ["surface"],
            buckets=TURN_BUCKETS,
        )
        self.model_requests = counter(
            "nerve_model_requests",
            "Requests to the model service by model and outcome.",
            ["model", "outcome"],
        )
        # The configured models' names (the `models` list): few, but read from the settings.
        self.models = _Names(MAX_MODELS)
        self.model_seconds = histogram(
            "nerve_model_request_seconds",
            "How long one request to the model service took.",
            buckets=MODEL_BUCKETS,
        )
        self.tokens = counter(
            "nerve_model_tokens", "Tokens of model requests by model and kind.", ["model", "kind"]
        )
        self.cached_tokens = counter(
            "nerve_model_cached_tokens", "Prompt tokens the provider read from its cache.", ["model"]
        )
        self.cost = counter(
            "nerve_model_cost", "Money model requests cost at the configured prices.", ["model"]
        )
        self.tool_calls = counter(
            "nerve_tool_calls",
            "Tool calls that reached an MCP server, by outcome.",
            ["server", "tool", "outcome"],
        )
        self.tool_seconds = histogram(
            "nerve_tool_call_seconds", "How long tool calls took.", ["server", "tool"], buckets=TOOL_BUCKETS
        )
        self.approvals = counter(
            "nerve_approval_decisions", "Tool calls decided on by people or expiry.", ["outcome"]
        )
        self.questions = counter("nerve_questions", "Questions from tools, by how they ended.", ["outcome"])
        self.rate_limit_waits = counter(
            "nerve_rate_limit_waits", "Rate-limit waits, by who asked for them.", ["platform"]
        )
        self.rate_limit_seconds = counter(
            "nerve_rate_limit_wait_seconds", "Seconds spent waiting out rate limits.", ["platform"]
        )
        self.restarts = counter(
            "nerve_mcp_server_restarts", "Times an MCP server was started again.", ["server"]
        )
        self.schedules_active = Gauge(
            "nerve_schedules_active",
            "Schedules whose slots run (not paused or ended), as the last runner's look found them.",
            registry=self.registry,
        )
        self.schedule_runs = counter(
            "nerve_schedule_runs", "Slots of schedules, by how they ended (missed: never run).", ["outcome"]
        )
        self.schedule_lateness = histogram(
            "nerve_schedule_run_lateness_seconds",
            "How long after its slot each scheduled run started.",
            buckets=LATENESS_BUCKETS,
        )
        self.servers = _Names(MAX_SERVERS)
        self.tools = _Names(MAX_TOOLS_PER_SERVER)
        self.platforms = _Names(MAX_PLATFORMS)
        self.registry.register(LiveGauges())
        # CPU, memory, open files and start time of the process (where /proc exists).
        ProcessCollector(registry=self.registry)

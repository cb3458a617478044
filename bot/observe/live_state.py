"""The present state of this process for /metrics: servers up, their circuits, the turn gate, waits.

Read from live objects when scraped; it belongs to the process, so a new run's figures keep it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Things waiting for people that one process keeps track of (the oldest are forgotten past this).
MAX_WAITING = 10_000


@dataclass
class Waiting:
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


class Breaker(Protocol):
    """A server link's circuit (`bot.mcp.circuit.Circuit`), read when /metrics is scraped."""

    @property
    def state(self) -> str: ...


# How a circuit's state reads as a number: the worst of a server's links is shown.
CIRCUIT_LEVELS = {"closed": 0.0, "half_open": 1.0, "open": 2.0}


class Gate(Protocol):
    @property
    def running(self) -> int: ...

    @property
    def waiting(self) -> int: ...

    @property
    def limit(self) -> int: ...


@dataclass
class Live:
    servers: dict[str, bool] = field(default_factory=dict)
    # Each server's circuits: the shared link's, and one per person for a per-person server.
    circuits: dict[str, weakref.WeakSet[Breaker]] = field(default_factory=dict)
    gate: weakref.ref[Gate] | None = None
    approvals: Waiting = field(default_factory=Waiting)
    questions: Waiting = field(default_factory=Waiting)


live = Live()


class LiveGauges(Collector):
    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "nerve_mcp_server_up", "1 while an MCP server is connected.", labels=["server"]
        )
        for name, ready in sorted(live.servers.items()):
            up.add_metric([name], 1.0 if ready else 0.0)
        yield up
        circuit = GaugeMetricFamily(
            "nerve_mcp_circuit_state",
            "Calls to an MCP server: 0 allowed, 1 one probe call allowed, 2 paused after repeated failures.",
            labels=["server"],
        )
        for name, breakers in sorted(live.circuits.items()):
            levels = [CIRCUIT_LEVELS.get(breaker.state, 0.0) for breaker in list(breakers)]
            circuit.add_metric([name], max(levels, default=0.0))
        yield circuit
        gate = live.gate() if live.gate is not None else None
        yield GaugeMetricFamily(
            "nerve_turns_running", "Turns holding a slot right now.", value=gate.running if gate else 0
        )
        yield GaugeMetricFamily(
            "nerve_turn_limit",
            "Turns allowed to run at once right now: the limit learnt from the model's answers.",
            value=gate.limit if gate else 0,
        )
        yield GaugeMetricFamily(
            "nerve_turn_queue_depth", "Turns waiting for a free slot.", value=gate.waiting if gate else 0
        )
        yield GaugeMetricFamily(
            "nerve_approvals_waiting",
            "Approval requests this process parked that wait for a decision.",
            value=live.approvals.count(),
        )
        yield GaugeMetricFamily(
            "nerve_questions_waiting",
            "Questions from tools this process showed that wait for an answer.",
            value=live.questions.count(),
        )

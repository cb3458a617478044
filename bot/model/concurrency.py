"""How many turns a model can take at once, learnt from its answers (AIMD, as TCP and Netflix's
concurrency-limits do it).

A fixed number is wrong both ways: too low for a fast model (turns queue behind idle capacity), too
high for a provider already answering 429. Each model's limit grows by one per answer while the
model keeps up (doubling per round trip until the first sign of trouble, then by one per round trip),
and is cut by a quarter on a 429 or when its answers suddenly take much longer than usual; it stays
between a floor and the configured ceiling (NERVE_MAX_CONCURRENT_TURNS). Requests sent before a cut
cannot cut it again: a burst of 429s from one crowded moment is one signal, not fifty.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]
Watcher = Callable[[], None]

# What one turn slot limit starts at before anything was learnt (the old fixed default), and the
# fewest turns a model is ever held to.
INITIAL = 16
FLOOR = 4
# A cut keeps this share of the limit.
BACKOFF = 0.75
# Answers this many times slower than the model's usual mean a jump (the fast average against the
# slow), when they are also this many seconds slower: a model's answers vary by their length, and a
# busy machine of our own slows a fast local model by fractions of a second, which is no provider's
# distress.
JUMP = 2.0
JUMP_SECONDS = 1.0
# Answers needed before latency is judged at all; the weights of the fast and slow averages.
WARMUP = 10
FAST = 0.3
SLOW = 0.05
# One slot short of the limit where the last cut happened, growth is this much slower: the
# provider's edge is near, and each step over it costs a 429.
PROBE = 4.0


@dataclass(frozen=True, slots=True)
class Ticket:
    """One request to the model: its number (which cut it was sent under), when, and how many were
    in flight with it under which limit."""

    number: int
    sent: float
    busy: int
    limit: int


class AdaptiveLimit:
    """One model's limit on turns at once; the model client reports every request's outcome to it."""

    def __init__(
        self, *, ceiling: int, floor: int = FLOOR, initial: int = INITIAL, clock: Clock = time.monotonic
    ) -> None:
        if ceiling < 1:
            raise ValueError("a concurrency limit needs a ceiling >= 1")
        self.ceiling = ceiling
        self.floor = max(1, min(floor, ceiling))
        self._limit = float(min(max(initial, self.floor), ceiling))
        self._clock = clock
        self._growing_fast = True  # until the first sign of trouble
        self._edge = math.inf  # the limit at the last cut
        self._tickets = 0
        self._cut_after = 0  # tickets numbered at or below this were sent before the last cut
        self._fast: float | None = None
        self._slow: float | None = None
        self._samples = 0
        self.in_flight = 0
        self.cuts = 0
        self._watchers: list[Watcher] = []

    @property
    def limit(self) -> int:
        # (A hair over, so that n steps of 1/n add up to one whole slot.)
        return int(self._limit + 1e-9)

    def watch(self, watcher: Watcher) -> None:
        """`watcher()` runs whenever the limit rises, so turns waiting for a slot can take the new ones."""
        self._watchers.append(watcher)

    def sent(self) -> Ticket:
        """A request is about to go out."""
        self._tickets += 1
        self.in_flight += 1
        return Ticket(self._tickets, self._clock(), self.in_flight, self.limit)

    def answered(self, ticket: Ticket) -> None:
        """The request got an answer: grow, unless answers suddenly take much longer than usual."""
        busy = max(ticket.busy, self.in_flight)
        self.in_flight = max(0, self.in_flight - 1)
        latency = self._clock() - ticket.sent
        self._fast = latency if self._fast is None else self._fast + FAST * (latency - self._fast)
        self._slow = latency if self._slow is None else self._slow + SLOW * (latency - self._slow)
        self._samples += 1
        slowed = (
            self._samples > WARMUP
            and self._fast > JUMP * self._slow
            and self._fast - self._slow > JUMP_SECONDS
        )
        if slowed and ticket.number > self._cut_after:
            self._cut()
            # What is slow now is the new usual: one jump is one cut.
            self._slow = self._fast
            return
        # A model not kept busy proves nothing about more: growth needs at least half the slots used
        # while this request was out.
        if busy * 2 < ticket.limit:
            return
        if self._growing_fast:
            step = 1.0
        elif self.limit + 1 >= self._edge:
            step = 1.0 / (PROBE * self.limit)  # the next slot is where the provider refused last time
        else:
            step = 1.0 / self.limit
        self._set(self._limit + step)

    def rate_limited(self, ticket: Ticket) -> None:
        """The provider answered 429: cut, once for every request sent before the last cut."""
        self.in_flight = max(0, self.in_flight - 1)
        if ticket.number > self._cut_after:
            self._cut()

    def failed(self, ticket: Ticket) -> None:
        """Any other failure (a timeout, a 5xx, a refused connection) says nothing about load here."""
        self.in_flight = max(0, self.in_flight - 1)

    def _cut(self) -> None:
        self._edge = self.limit
        self._growing_fast = False
        self._cut_after = self._tickets
        self.cuts += 1
        self._set(self._limit * BACKOFF)

    def _set(self, value: float) -> None:
        before = self.limit
        self._limit = min(float(self.ceiling), max(float(self.floor), value))
        if self.limit > before:
            for watcher in list(self._watchers):
                watcher()


class ConcurrencyLimits:
    """Every model's limit, by model name, with one ceiling and floor (shared by the client and the gate)."""

    def __init__(
        self, *, ceiling: int, floor: int = FLOOR, initial: int = INITIAL, clock: Clock = time.monotonic
    ) -> None:
        self.ceiling, self.floor, self.initial = ceiling, floor, initial
        self._clock = clock
        self._limits: dict[str, AdaptiveLimit] = {}

    def of(self, model: str) -> AdaptiveLimit:
        """The limit of `model`, made on first use."""
        if model not in self._limits:
            self._limits[model] = AdaptiveLimit(
                ceiling=self.ceiling, floor=self.floor, initial=self.initial, clock=self._clock
            )
        return self._limits[model]

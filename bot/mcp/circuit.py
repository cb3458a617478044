"""A circuit breaker per server link: a server that keeps crashing is left alone for a while.

Restarting a crashed server is right once; a tool whose every call kills its server would otherwise
turn each turn into a crash, a restart and a wait. After `threshold` failures (crashes, failed
starts) within `window` seconds the circuit opens: calls fail at once with a message people can read,
for `open_for` seconds. Then one call (the probe) is let through while the others still fail fast:
if the server answers it, the circuit closes; if the server fails again, it opens for another
`open_for` seconds.

The state is computed from the clock when read, so nothing has to run for an open circuit to turn
half-open. One `Circuit` belongs to one `ServerLink` (a per-person link has its own).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from typing import Literal

CircuitState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """When a circuit opens (`threshold` failures within `window` s) and for how long (`open_for` s)."""

    threshold: int = 3
    window: float = 60.0
    open_for: float = 60.0


@dataclass(frozen=True, slots=True)
class Ticket:
    """Leave to make one call; `probe` when it is the one call that decides a half-open circuit."""

    probe: bool


@dataclass(eq=False)
class Circuit:
    """Counts a server's failures and says whether the next call may go to it."""

    server: str
    policy: InitVar[CircuitPolicy | None] = None
    _: KW_ONLY
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self, policy: CircuitPolicy | None) -> None:
        policy = policy or CircuitPolicy()
        self._threshold = policy.threshold
        self._window = policy.window
        self._open_for = policy.open_for
        self._failures: deque[float] = deque()
        self._opened_at: float | None = None
        self._probing = False
        self.times_opened = 0

    @property
    def state(self) -> CircuitState:
        if self._opened_at is None:
            return "closed"
        if self.clock() - self._opened_at < self._open_for:
            return "open"
        return "half_open"

    def admit(self) -> Ticket | str:
        """A ticket for the call, or why it may not be made (a sentence for people)."""
        state = self.state
        if state == "closed":
            return Ticket(probe=False)
        if state == "half_open" and not self._probing:
            self._probing = True
            return Ticket(probe=True)
        return self.refusal()

    def refusal(self) -> str:
        return f"{self.server} is failing repeatedly; nerve paused calls to it for {self._open_for:g} s"

    def settle(self, ticket: Ticket, *, answered: bool | None) -> None:
        """How an admitted call ended: the server answered (True), failed (False), or the call ended
        without telling either way (None: cancelled); only a probe's outcome changes the state."""
        if not ticket.probe:
            return
        self._probing = False
        if answered is None:
            return  # the next call probes instead
        if answered:
            self._close()
        elif self.state != "open":  # the crash itself may have opened it already
            self._open()

    def record_failure(self) -> None:
        """The server crashed or failed to start."""
        now = self.clock()
        if self.state == "half_open":
            self._open()
            return
        if self.state == "open":
            return
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self._window:
            self._failures.popleft()
        if len(self._failures) >= self._threshold:
            self._open()

    def _open(self) -> None:
        self._opened_at = self.clock()
        self._failures.clear()
        self.times_opened += 1

    def _close(self) -> None:
        self._opened_at = None
        self._failures.clear()

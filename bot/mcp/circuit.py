"""A circuit breaker per server link: a server that keeps crashing is left alone for a while.

The state is computed from the clock when read, so nothing has to run for it to turn half-open."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

CircuitState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """When a circuit opens (`threshold` failures within `window` s) and for how long (`open_for` s)."""

    threshold: int = 3
    window: float = 60.0
    open_for: float = 60.0


class Circuit:
    def __init__(
        self, server: str, policy: CircuitPolicy | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.server = server
        self.clock = clock
        self._policy = policy or CircuitPolicy()
        self._failures: deque[float] = deque()
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> CircuitState:
        if self._opened_at is None:
            return "closed"
        if self.clock() - self._opened_at < self._policy.open_for:
            return "open"
        return "half_open"

    def admit(self) -> bool | str:
        """Leave to make the call, True when it is the probe (the one call that decides a half-open
        circuit); or why it may not be made (a sentence for people)."""
        state = self.state
        if state == "closed":
            return False
        if state == "half_open" and not self._probing:
            self._probing = True
            return True
        return (
            f"{self.server} is failing repeatedly; nerve paused calls to it for {self._policy.open_for:g} s"
        )

    def settle(self, probe: bool, *, answered: bool | None) -> None:
        """How an admitted call ended (None: cancelled); only a probe's outcome changes the state."""
        if not probe:
            return
        self._probing = False
        if answered is None:
            return  # the next call probes instead
        if answered:
            self._opened_at = None
            self._failures.clear()
        elif self.state != "open":  # the crash itself may have opened it already
            self._open()

    def record_failure(self) -> None:
        """The server crashed or failed to start."""
        if (state := self.state) != "closed":
            if state == "half_open":
                self._open()
            return
        now = self.clock()
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self._policy.window:
            self._failures.popleft()
        if len(self._failures) >= self._policy.threshold:
            self._open()

    def _open(self) -> None:
        self._opened_at = self.clock()
        self._failures.clear()

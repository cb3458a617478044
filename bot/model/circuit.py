"""A circuit per model: a model that just failed is skipped for a cool-down, then probed once.

Without it every turn during an outage would first wait for the failing model's timeout before its
fallback answered. The state is computed from the clock when read, so nothing runs in the background.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

ModelCircuitState = Literal["closed", "open", "half_open"]

# Seconds a failed model is skipped before one request probes it again.
DEFAULT_COOL_DOWN = 60.0


class ModelCircuit:
    """Closed: asked. Open: skipped until the cool-down ends. Half-open: one probe decides."""

    def __init__(
        self, *, cool_down: float = DEFAULT_COOL_DOWN, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cool_down = cool_down
        self._clock = clock
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> ModelCircuitState:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.cool_down:
            return "open"
        return "half_open"

    @property
    def opens_again_in(self) -> float:
        """Seconds until the model is probed again (0 when it may be asked now)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self.cool_down - (self._clock() - self._opened_at))

    def admit(self) -> Literal["ask", "probe", "skip"]:
        """Whether a request may go to this model now; "probe" is the one request after a cool-down."""
        state = self.state
        if state == "closed":
            return "ask"
        if state == "half_open" and not self._probing:
            self._probing = True
            return "probe"
        return "skip"

    def succeeded(self) -> None:
        self._opened_at = None
        self._probing = False

    def failed(self) -> None:
        """The model failed in a way its fallback can cover: skip it for a cool-down from now."""
        self._opened_at = self._clock()
        self._probing = False

    def released(self) -> None:
        """An admitted request ended without telling (cancelled, or refused for its own content)."""
        self._probing = False

"""A clock the test moves by hand, for the agent's approval expiry."""

from __future__ import annotations


class Clock:
    """Returns `now`; a test adds to it to let requests expire."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

"""A tool call's clock: an idle timeout that progress restarts, paused while a person answers.

A server that reports progress is working, so each report gives it the idle timeout afresh; a
server waiting on a person's form is not slow, so the clock stands still while they fill it in.
`most` still bounds the server's own time in all, so a server reporting progress forever ends.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import anyio
from mcp.shared.dispatcher import ProgressFnT

from bot.types import CallContext, InputAnswer, InputDraft


class CallTimer:
    """Moves one call's cancel-scope deadline as the call progresses."""

    def __init__(self, *, idle: float, most: float, spent: float = 0.0) -> None:
        self._idle = idle
        self._most = most
        # The server's own time so far (seconds), not counting time spent waiting for people.
        self._spent = spent
        self._since = time.monotonic()
        self._asking = 0
        self.scope: anyio.CancelScope | None = None

    def restart(self) -> None:
        """Progress or an answer arrived: the idle timeout starts again, within the overall bound."""
        if self.scope is None or self._asking:
            return
        now = anyio.current_time()
        left = self._most - self._working()
        self.scope.deadline = now + max(0.0, min(self._idle, left))

    def out_of_time(self) -> bool:
        return self._working() >= self._most - 0.001

    def _working(self) -> float:
        if self._asking:
            return self._spent
        return self._spent + time.monotonic() - self._since

    def watch(self, context: CallContext) -> CallContext:
        """The context with its `ask` wrapped: the clock stops while a person answers."""
        ask = context.ask
        if ask is None:
            return context

        async def paused(draft: InputDraft) -> InputAnswer:
            self._pause()
            try:
                return await ask(draft)
            finally:
                self._resume()
                self.restart()

        return replace(context, ask=paused)

    def _pause(self) -> None:
        if not self._asking:
            self._spent += time.monotonic() - self._since
        self._asking += 1
        if self.scope is not None:
            self.scope.deadline = math.inf

    def _resume(self) -> None:
        self._asking -= 1
        if not self._asking:
            self._since = time.monotonic()

    def progress_callback(self, context: CallContext) -> ProgressFnT:
        report = context.report

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.restart()
            if report is not None:
                await report(progress, total, message)

        return on_progress

"""What the person at the keyboard types, and what Ctrl-C does meanwhile: lines are read without
blocking the loop (`LineReader`); Ctrl-C runs the innermost open `on_ctrl_c` block's action."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any, TypeVar

from bot.text import scrub

logger = logging.getLogger(__name__)

# Reads one answer after showing the question; None on Ctrl-C or end of input.
ReadLine = Callable[[str], Awaitable[str | None]]

# The actions of the `on_ctrl_c` blocks now open, innermost last: Ctrl-C runs the innermost.
_ctrl_c_actions: list[Callable[[], object]] = []
# What SIGINT did before the first of them opened (asyncio.run's own handler), put back when the
# last one closes: blocks opened in different tasks may close in any order.
_outer_handler: Any = None

# Seconds between the cancels of work that Ctrl-C stopped and that has not ended yet.
CANCEL_AGAIN_SECONDS = 1.0

T = TypeVar("T")


class Interrupted(Exception):
    """Ctrl-C stopped the work it was pressed during (`interruptible`)."""


@contextlib.contextmanager
def on_ctrl_c(action: Callable[[], object]) -> Iterator[None]:
    """Ctrl-C runs `action` while inside. Blocks nest (a server's question is asked while its turn
    runs): the inner one takes Ctrl-C, and on leaving gives it back to the one around it."""
    global _outer_handler
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, action)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (not the main thread)
        yield
        return
    if not _ctrl_c_actions:
        _outer_handler = previous
    _ctrl_c_actions.append(action)
    try:
        yield
    finally:
        del _ctrl_c_actions[max(i for i, a in enumerate(_ctrl_c_actions) if a is action)]
        if _ctrl_c_actions:
            loop.add_signal_handler(signal.SIGINT, _ctrl_c_actions[-1])
        else:
            loop.remove_signal_handler(signal.SIGINT)
            # remove_signal_handler installs Python's default handler; put back asyncio.run's own.
            signal.signal(signal.SIGINT, _outer_handler)


async def interruptible(work: Awaitable[T]) -> T:
    """`work`'s result, or Interrupted when Ctrl-C stopped it first.

    Ctrl-C cancels the work, and again every CANCEL_AGAIN_SECONDS until it has ended: a library may
    catch a cancel to clean up and carry on, and one Ctrl-C should stop it. The loop's own handler
    takes SIGINT meanwhile, so this holds also when nerve was started with SIGINT ignored."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    pressed = False

    def cancel() -> None:
        nonlocal pressed
        if task.done():
            return
        if pressed:
            logger.warning("Ctrl-C: the work did not stop yet; cancelling it again")
        pressed = True
        task.cancel()
        loop.call_later(CANCEL_AGAIN_SECONDS, cancel)

    with on_ctrl_c(lambda: None if pressed else cancel()):
        try:
            return await task
        except asyncio.CancelledError:
            # Interrupted only when the work alone was cancelled, not the caller too.
            current = asyncio.current_task()
            if pressed and task.cancelled() and not (current is not None and current.cancelling()):
                raise Interrupted from None
            raise


def tolerate_undecodable_input() -> None:
    """Let stdin hand over bytes that are not UTF-8 (as lone surrogates) instead of failing the read:
    they are scrubbed to U+FFFD, so a stray Latin-1 byte costs a character, not the chat."""
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")


class LineReader:
    """Lines from stdin without blocking the loop; None at end of input or on Ctrl-C.

    Each line is read by a daemon thread, not the loop's executor: `asyncio.run` waits for executor
    threads at exit, so a thread stuck in `input()` would keep nerve from leaving after Ctrl-C.
    Ctrl-C answers None at once, but that thread stays blocked in `input()`, and a second `input()`
    would wait behind it; so the next read shows its own prompt and takes that thread's line."""

    def __init__(self) -> None:
        self._unclaimed: asyncio.Future[str | None] | None = None

    async def __call__(self, prompt: str) -> str | None:
        loop = asyncio.get_running_loop()
        interrupted: asyncio.Future[None] = loop.create_future()
        # Ctrl-C is caught before the prompt can appear: a person may press it as soon as they see it.
        with on_ctrl_c(partial(_resolve, interrupted, None)):
            line, self._unclaimed = self._unclaimed, None
            if line is None:
                line = _read_in_thread(loop, prompt)
            elif not line.done():
                print(prompt, end="", flush=True)
            try:
                await asyncio.wait((line, interrupted), return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the question went away: the next read takes the line
                self._unclaimed = line
                raise
        if line.done():
            return line.result()
        self._unclaimed = line
        return None


def _read_in_thread(loop: asyncio.AbstractEventLoop, prompt: str) -> asyncio.Future[str | None]:
    line: asyncio.Future[str | None] = loop.create_future()

    def read() -> None:
        try:
            value: str | None = scrub(input(prompt))
        except (EOFError, KeyboardInterrupt, OSError, UnicodeDecodeError):
            value = None
        with contextlib.suppress(RuntimeError):  # the loop closed while we waited: nobody is listening
            loop.call_soon_threadsafe(_resolve, line, value)

    threading.Thread(target=read, name="nerve-stdin", daemon=True).start()
    return line


def _resolve(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


async def read_line(prompt: str) -> str | None:
    """One line from stdin (see `LineReader`), for a program that reads only until a Ctrl-C."""
    return await LineReader()(prompt)

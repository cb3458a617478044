"""A test still running after STUCK_AFTER seconds prints the stack of every asyncio task of its loop.

faulthandler and pytest-timeout print the threads' stacks, where a stuck asyncio test shows only
its loop waiting in `select`; the coroutine that waits for ever is in a task's stack. Printed to
the test's own output, so it shows in the report of a test that then times out.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

# Before pytest-timeout's 600 s fails the test (and its own dump): the tasks are still there.
STUCK_AFTER = 280.0


def _print_tasks(nodeid: str) -> None:
    out = sys.stdout
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
    out.write(f"\n===== {nodeid}: still running after {STUCK_AFTER:g} s; its asyncio tasks =====\n")
    for loop in loops:
        for task in list(asyncio.all_tasks(loop)):
            out.write(f"--- {task.get_name()}\n")
            for frame in _awaiting(task.get_coro()):
                out.write(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}\n")
    out.flush()


def _awaiting(coro: object) -> Iterator[FrameType]:
    """The frames of a coroutine and of what it awaits, down to where it waits (print_stack shows
    only the outermost)."""
    for _ in range(200):
        frame = (
            getattr(coro, "cr_frame", None)
            or getattr(coro, "ag_frame", None)
            or getattr(coro, "gi_frame", None)
        )
        if frame is not None:
            yield frame
        coro = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "ag_await", None)
            or getattr(coro, "gi_yieldfrom", None)
        )
        if coro is None:
            return


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    finished = threading.Event()

    def watch() -> None:
        if not finished.wait(STUCK_AFTER):
            _print_tasks(item.nodeid)

    threading.Thread(target=watch, name="nerve-stuck-tasks", daemon=True).start()
    try:
        yield
    finally:
        finished.set()

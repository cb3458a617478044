"""Winding a front end down on SIGTERM: how long running work is waited for.

Intake stops and `/readyz` answers 503; running turns get NERVE_SHUTDOWN_GRACE seconds, then what
still runs is cut off for the next start. Waiting never cancels anything itself: only the front end
knows which work is safe to stop where.
"""

from __future__ import annotations

import asyncio
import gc


async def finished_within(tasks: set[asyncio.Task[None]], grace: float) -> bool:
    """Wait up to `grace` seconds for the tasks in `tasks` (a live set: it shrinks as they end, and
    may grow); True when all of them ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while tasks:
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.wait(list(tasks), timeout=left)
    return True


def leave_quickly() -> None:
    """Let the process end without the interpreter's garbage collection over everything it holds.

    A running nerve holds some 100,000 objects in over 1,000 modules; collecting them at exit takes
    most of a second on a busy machine, time a shutdown's grace would have to cover. Frozen, they
    are still freed by reference counting (files and sockets close, atexit handlers run); only the
    collection passes over them are skipped."""
    gc.freeze()

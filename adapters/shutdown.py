"""Winding a front end down on SIGTERM: how long running work is waited for.

The sequence (`adapters.cli.until_terminated` and each front end's runner): intake stops at once and
`/readyz` answers 503; running turns get NERVE_SHUTDOWN_GRACE seconds; what still runs then is cut
off and left for the next start; every `async with` closes what it opened, the MCP servers among
them. Waiting never cancels anything by itself: cutting off is the front end's decision, since only
it knows which work is safe to stop where. An MCP server that does not exit when its stdin closes is
killed within about a second (`bot.mcp.stdio`), so the whole stop stays within the grace plus one.
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

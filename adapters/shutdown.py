"""Winding a front end down on SIGTERM. Waiting never cancels anything itself: only the front end
knows which work is safe to stop where.
"""

from __future__ import annotations

import asyncio


async def finished_within(tasks: set[asyncio.Task[None]], grace: float) -> bool:
    """Wait up to `grace` seconds for `tasks` (a live set); True when all of them ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while tasks:
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.wait(list(tasks), timeout=left)
    return True

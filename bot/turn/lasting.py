"""Writes that must land even when whoever started them is being cancelled.

A dropped write leaves the store saying the opposite (a question still open, a turn still resuming).
`asyncio.shield` alone lets a second cancel release the caller while the write goes on unawaited, and
then a shutdown closes the store under it; `finish_anyway` keeps the caller until the write is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


# Seconds a cancelled caller waits for its write at most: a store that hangs must not hold a
# shutdown for ever (an anyio scope re-cancels at every turn of the loop while it waits).
PATIENCE = 10.0


async def finish_anyway(write: Coroutine[Any, Any, T]) -> T:
    """Run `write` to its end however often the caller is cancelled meanwhile (waiting at most PATIENCE
    seconds); then its result, or CancelledError when the caller was cancelled."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.done():
            raise  # the write itself was cancelled, or it ended just as the caller was
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not task.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            logger.warning("a write made while stopping took over %g s; not waiting for it", PATIENCE)
            raise asyncio.CancelledError
        try:
            await asyncio.wait({task}, timeout=remaining)
        except asyncio.CancelledError:
            continue  # cancelled again (an anyio scope does so at every await): keep waiting
    task.result()  # its error, if it failed
    raise asyncio.CancelledError

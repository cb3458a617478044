"""Keeping the inbox small: delivery records are pruned at start and then on a schedule.

The inbox exists for dedupe (platforms re-deliver within minutes) and for replay after a restart;
a record older than the retention (NERVE_INBOX_RETENTION_HOURS) serves neither, answered or not —
an event that old is not answered any more. Pruning is housekeeping: a failure is logged and tried
again at the next tick, never the end of the process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from bot.errors import StoreError
from bot.seams import Inbox, PostRecords

logger = logging.getLogger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


@asynccontextmanager
async def pruning_inbox(
    inbox: Inbox,
    *,
    retention_hours: float,
    every: float | None = None,
    wait: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[None]:
    """Prune now, before the block runs (so a replay at start-up sees only live records), then every
    `every` seconds until the block ends; the task doing it is cancelled and awaited on the way out.

    By default hourly, or twice per retention when that is shorter, so no record outlives it by much.
    """
    if every is None:
        every = min(PRUNE_EVERY_SECONDS, retention_hours * 3600 / 2)
    await _prune(inbox, retention_hours)
    task = asyncio.create_task(_every(inbox, retention_hours, every, wait), name="inbox-pruning")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _every(
    inbox: Inbox, retention_hours: float, every: float, wait: Callable[[float], Awaitable[None]]
) -> None:
    while True:
        await wait(every)
        await _prune(inbox, retention_hours)


async def _prune(inbox: Inbox, retention_hours: float) -> None:
    try:
        removed = await inbox.prune_events(older_than_days=retention_hours / 24)
    except StoreError as exc:
        logger.warning("could not prune the inbox (will try again): %s", exc.message)
        return
    if removed:
        logger.info("pruned %d inbox record(s) older than %g hours", removed, retention_hours)
    if isinstance(inbox, PostRecords):
        try:
            await inbox.prune_posts(older_than_days=retention_hours / 24)
        except StoreError as exc:
            logger.warning("could not prune the record of posted answers (will try again): %s", exc.message)

"""Keeping the store small, at start and then on a schedule: an inbox record older than
NERVE_INBOX_RETENTION_HOURS serves neither dedupe nor replay; conversations idle longer than
NERVE_RETENTION_DAYS (when set) are deleted, the audit kept; memories saved longer ago than that too,
only when NERVE_MEMORY_RETENTION is on (by default they stay until forgotten). A failure is tried again
at the next tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime

from bot.errors import StoreError
from bot.store.base import ConversationStore
from bot.store.dialect import days_ago

logger = logging.getLogger(__name__)

PRUNE_EVERY_SECONDS = 3600.0


async def prune_conversations(
    store: ConversationStore, older_than_days: float, now: datetime | None = None
) -> int:
    """Each under its thread's turn lock, re-checked as it is deleted; returns how many."""
    cutoff = days_ago(older_than_days, now)
    removed = 0
    for conversation in await store.idle_conversations(older_than_days, now):
        async with store.turn_lock.hold(conversation.key):
            outcome = await store.delete_conversation(conversation.id, idle_before=cutoff)
        removed += outcome == "deleted"
    return removed


@asynccontextmanager
async def pruning_inbox(
    store: ConversationStore,
    *,
    retention_hours: float,
    conversation_retention_days: float = 0.0,
    memory_retention: bool = False,
    every: float | None = None,
    wait: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[None]:
    """Now (a replay at start-up sees only live records), then every `every` seconds (hourly, or twice
    per retention if shorter) until the block ends."""
    if every is None:
        every = min(PRUNE_EVERY_SECONDS, retention_hours * 3600 / 2)
    memory_days = conversation_retention_days if memory_retention else 0.0
    await _prune(store, retention_hours, conversation_retention_days, memory_days)

    async def on_schedule() -> None:
        while True:
            await wait(every)
            await _prune(store, retention_hours, conversation_retention_days, memory_days)

    task = asyncio.create_task(on_schedule(), name="inbox-pruning")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _prune(
    store: ConversationStore, retention_hours: float, conversation_days: float, memory_days: float
) -> None:
    days = retention_hours / 24
    if conversation_days > 0:
        async with _housekeeping("old conversations"):
            if removed := await prune_conversations(store, conversation_days):
                logger.info("deleted %d conversation(s) idle for over %g days", removed, conversation_days)
    if memory_days > 0:
        async with _housekeeping("old memories"):
            if removed := await store.prune_memories(memory_days):
                logger.info("deleted %d memories saved over %g days ago", removed, memory_days)
    async with _housekeeping("the inbox"):
        if removed := await store.prune_events(older_than_days=days):
            logger.info("pruned %d inbox record(s) older than %g hours", removed, retention_hours)
        async with _housekeeping("the record of posted answers"):
            await store.prune_posts(older_than_days=days)


@asynccontextmanager
async def _housekeeping(what: str) -> AsyncIterator[None]:
    try:
        yield
    except StoreError as exc:
        logger.warning("could not prune %s (will try again): %s", what, exc.message)

"""Deliveries recorded in the inbox and answered outside their delivery, the same on every platform.

Every delivery is claimed in the inbox before it is acked, so nothing is lost: one not answered is
taken up again at start-up, by its job, or by the sweep."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Generic, Protocol, TypeVar

from adapters.common.desk import AskDesk
from adapters.jobs_runtime import Launcher
from bot.agent import Agent
from bot.types import ConversationKey

logger = logging.getLogger(__name__)


class Keyed(Protocol):
    """A recorded delivery's turn: it knows its conversation."""

    @property
    def key(self) -> ConversationKey: ...


Turn = TypeVar("Turn", bound=Keyed)


@dataclass(eq=False)
class Recorded(Generic[Turn]):
    """One platform's recorded deliveries: `left_over` reads a payload back into its turn."""

    agent: Agent
    platform: str
    launch: Launcher
    left_over: Callable[[str, str], Awaitable[Turn | None]]
    _: KW_ONLY
    # What a delivery is called in log lines: "Slack event", "Discord delivery".
    noun: str

    async def recover(self, here: Callable[[str, Turn], None]) -> int:
        """At start-up: answer the deliveries left unfinished (`here`), or with jobs queue those with no
        job waiting or running (another process may be answering them); returns how many."""
        count = 0
        for event_id, payload in await self.agent.inbox.unfinished_events(self.platform):
            turn = await self.left_over(event_id, payload)
            if turn is None:
                continue
            if self.launch.jobs is not None:
                count += await self.launch.requeue(event_id, turn.key)
                continue
            here(event_id, turn)
            count += 1
        return count

    async def take(self, event_id: str) -> Turn | None:
        """The turn of one recorded delivery for its job; None when it was answered already."""
        payload = await self.agent.inbox.unfinished_payload(self.platform, event_id)
        if payload is None:
            logger.info("%s %s was answered already", self.noun, event_id)
            return None
        return await self.left_over(event_id, payload)

    async def requeue_left(self) -> None:
        """With jobs: queue the deliveries a process recorded but died before queueing."""
        if self.launch.jobs is None:
            return
        try:
            for event_id, payload in await self.agent.inbox.unfinished_events(self.platform):
                turn = await self.left_over(event_id, payload)
                if turn is not None and await self.launch.requeue(event_id, turn.key):
                    logger.warning("queued %s %s, recorded but never queued", self.noun, event_id)
        except Exception:
            logger.exception("looking for %ss recorded but never queued failed", self.noun)


async def sweep(recorded: Recorded[Any], desk: AskDesk) -> list[str]:
    """Queue what was recorded but never queued, then expire the requests out of time; those expired now."""
    await recorded.requeue_left()
    try:
        return await desk.sweep()
    except Exception:
        logger.exception("looking for expired approval requests failed")
        return []


async def sweep_forever(sweep: Callable[[], Awaitable[object]], interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        await sweep()

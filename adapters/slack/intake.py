"""Which deliveries are turns, each claimed in the inbox before it is acked, and started.

Claiming before the ack means a re-delivery is acked and ignored, and a turn cut short by a restart is
answered at start-up; while nerve stops, a delivery is claimed, acked and left for the next start.
With the database unreachable the intake waits at most `INTAKE_WAIT_SECONDS`, then answers 503 with
Retry-After, so every delivery acked 200 was recorded and is answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse

from adapters.common.tasks import Spawn
from adapters.jobs_runtime import Launcher
from adapters.slack.events import DM_THREAD, PLATFORM, Identity, Turn, classify, inbox_payload
from adapters.slack.settings import SlackSettings
from bot.agent import Agent
from bot.errors import StoreError
from bot.observe import LogThrottle
from bot.types import ConversationKey

logger = logging.getLogger(__name__)

# How long the intake waits for the database before refusing a delivery: well within Slack's 3 s.
INTAKE_WAIT_SECONDS = 2.0
# What the 503 asks Slack to wait before its retry.
RETRY_AFTER_SECONDS = 5
# Threads followed (answered without a mention) in this process; the oldest are forgotten past this.
FOLLOWED_MAX = 10_000
# While the database is away, one line this often, with a count of the deliveries refused since.
_lines = LogThrottle(every=10.0)


def unrecorded(event_id: str, exc: BaseException) -> BoltResponse:
    """The answer to a delivery the inbox could not record (`exc`): 503 with Retry-After."""
    waited = f"the database gave no connection within {INTAKE_WAIT_SECONDS:g} s"
    reason = exc.message if isinstance(exc, StoreError) else waited
    _say(
        "refused",
        "could not record Slack event %s (database unreachable: %s): answered 503 so Slack delivers it again",
        event_id,
        reason,
    )
    return BoltResponse(status=503, body="", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def left_to_sweep(event_id: str) -> None:
    """A recorded delivery whose job could not be queued in time: the sweep queues it later."""
    _say(
        "left to the sweep",
        "recorded Slack event %s but could not queue its job within %g s (database unreachable): it is"
        " queued by the sweep once the database is back",
        event_id,
        INTAKE_WAIT_SECONDS,
    )


def _say(kind: str, message: str, *args: object) -> None:
    held = _lines.allow(kind)
    if held is not None:
        more = f" ({held} more {kind} since the last line)" if held else ""
        logger.warning(message + "%s", *args, more)


@dataclass(eq=False)
class Intake:
    """One bot's deliveries: claimed before the ack (`claim`), then answered here or queued as jobs."""

    agent: Agent
    settings: SlackSettings
    launch: Launcher
    run: Callable[[Turn], Coroutine[Any, Any, None]]
    spawn: Spawn

    def __post_init__(self) -> None:
        self._followed: OrderedDict[ConversationKey, None] = OrderedDict()
        # Set when nerve stops: a delivery is then claimed and acked, and left for the next start.
        self.stopping = False

    def follow(self, turn: Turn) -> None:
        if turn.key.thread == DM_THREAD:
            return
        self._followed[turn.key] = None
        self._followed.move_to_end(turn.key)
        while len(self._followed) > FOLLOWED_MAX:
            self._followed.popitem(last=False)

    async def claim(
        self, body: dict[str, Any], context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        if body.get("type") == "event_callback" and context.bot_user_id:
            me = Identity(user_id=context.bot_user_id, bot_id=context.bot_id)
            turn = classify(
                body,
                me,
                allow_bots=self.settings.nerve_slack_allow_bots,
                follow_threads=self.settings.nerve_slack_follow_threads,
                followed=self._followed.__contains__,
                dm_threads=self.settings.slack_experience == "agent",
            )
            if turn is not None:
                # On PostgreSQL (jobs): recorded within Slack's 3 s, or refused with a 503 so Slack
                # retries (`.intake`); a claim that landed after the refusal is queued by the retry
                # (`_left_behind`). The embedded SQLite store is never unreachable, and a turn it
                # claimed late would have no such second chance in this process: no bound there.
                bounded = self.launch.jobs is not None
                deadline = asyncio.get_running_loop().time() + INTAKE_WAIT_SECONDS if bounded else None
                try:
                    async with asyncio.timeout_at(deadline):
                        new = await self._record(turn, body)
                except (StoreError, TimeoutError) as exc:
                    return unrecorded(turn.event_id, exc)
                if not new:
                    return BoltResponse(status=200, body="")
                context["nerve_turn"] = turn
                context["nerve_deadline"] = deadline
        await next()
        return None

    async def _record(self, turn: Turn, body: dict[str, Any]) -> bool:
        """Claim a turn's delivery in the inbox; False for a re-delivery, or while nerve stops."""
        if not await self.agent.inbox.claim_event(PLATFORM, turn.event_id, inbox_payload(body)):
            if self.launch.jobs is not None and await self._left_behind(turn):
                logger.warning(
                    "Slack re-delivered event %s, recorded but never queued: queued now", turn.event_id
                )
            else:
                logger.info("Slack re-delivered event %s; already handled", turn.event_id)
            return False
        if self.stopping:
            logger.info("kept Slack event %s for the next start (shutting down)", turn.event_id)
            return False
        return True

    async def _left_behind(self, turn: Turn) -> bool:
        """Queue a re-delivered event whose process died before queueing it, ahead of the thread's next."""
        if await self.agent.inbox.unfinished_payload(PLATFORM, turn.event_id) is None:
            return False
        self.follow(turn)
        return await self.launch.requeue(turn.event_id, turn.key)

    async def on_turn(self, context: AsyncBoltContext) -> None:
        turn = context.get("nerve_turn")
        if not isinstance(turn, Turn):
            return
        # With jobs, queued before the ack: Slack sends a thread's next message only after this one is
        # queued, so the thread's jobs (one at a time, in queue order) answer in the order people wrote.
        self.follow(turn)
        deadline = context.get("nerve_deadline")
        try:
            async with asyncio.timeout_at(deadline if isinstance(deadline, float) else None):
                await self.launch.event(turn.event_id, turn.key, lambda: self.run(turn))
        except TimeoutError:
            left_to_sweep(turn.event_id)  # recorded: acked, and queued by a later sweep

    def start(self, turn: Turn) -> None:
        self.follow(turn)
        self.spawn(self.launch.event(turn.event_id, turn.key, lambda: self.run(turn)))

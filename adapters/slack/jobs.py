"""Slack's work as jobs that every nerve process on one PostgreSQL database shares (`bot.jobs`).

With NERVE_DATABASE_URL set, the process Slack delivers an event to records it in the inbox (as
always: nothing a person writes is lost) and queues a job; the worker of whichever process is free
answers it. Three kinds of job, each run by `SlackBot`'s own code:

- `slack.event`: answer one recorded event (`SlackBot.answer_event`);
- `slack.resume`: go on with a parked turn once its request is decided, expired or signed in;
- `slack.deferred`: answer the messages that waited behind a parked turn.

A job of one thread never overlaps another of that thread (procrastinate's lock per conversation),
and a job cut off by a dying process runs again elsewhere: `adapters.slack.posts` keeps its answer
from being posted twice. Without jobs (SQLite, one process), `Launcher` runs the same work as
tasks of this process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from bot.errors import StoreError
from bot.types import ConversationKey

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

EVENT_JOB = "slack.event"
RESUME_JOB = "slack.resume"
DEFERRED_JOB = "slack.deferred"

# Runs a coroutine as a task this process owns (`SlackBot.spawn`).
Spawn = Callable[[Coroutine[Any, Any, None]], None]


def event_lock(event_id: str) -> str:
    """The queueing lock of a Slack event's job: one waiting job per event, across platforms."""
    return f"slack:{event_id}"


class Launcher:
    """Where Slack work runs: as a job any process takes (PostgreSQL), or a task here (SQLite)."""

    def __init__(self, jobs: TurnJobs | None, spawn: Spawn) -> None:
        self.jobs = jobs
        self._spawn = spawn

    async def event(
        self, event_id: str, key: ConversationKey, here: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        """Answer a recorded event: queue its job, or run `here()` in this process."""
        if self.jobs is None:
            self._spawn(here())
            return
        await self._queue(EVENT_JOB, {"event_id": event_id}, event_lock(event_id), key)

    async def resume(
        self, request_id: str, key: ConversationKey | None, here: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        """Go on with a decided request: its job, or `here()` in this process."""
        if self.jobs is None or key is None:
            self._spawn(here())
            return
        await self._queue(RESUME_JOB, {"request_id": request_id}, f"slack:resume:{request_id}", key)

    async def deferred(self, key: ConversationKey, here: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Answer the messages that waited in a thread: its job, or `here()` in this process."""
        if self.jobs is None:
            self._spawn(here())
            return
        payload = {"workspace": key.workspace, "channel": key.channel, "thread": key.thread}
        await self._queue(DEFERRED_JOB, payload, f"slack:deferred:{key}", key)

    async def requeue(self, event_id: str, key: ConversationKey) -> bool:
        """Queue an event that has no job waiting or running (left over by a process that died
        between recording and queueing it); True if it was queued now."""
        assert self.jobs is not None
        if await self.jobs.pending(event_lock(event_id)):
            return False
        return await self._queue(EVENT_JOB, {"event_id": event_id}, event_lock(event_id), key)

    async def _queue(self, name: str, payload: dict[str, str], lock: str, key: ConversationKey) -> bool:
        assert self.jobs is not None
        try:
            queued = await self.jobs.enqueue(name, payload, event=lock, conversation=str(key))
        except StoreError as exc:
            # The event stays recorded and unfinished: the sweep of some process queues it later.
            logger.warning("could not queue %s for %s (queued by a later sweep): %s", name, key, exc.message)
            return False
        if not queued:
            logger.info("%s for %s is queued already", name, lock)
        return queued


def job_handlers(
    answer_event: Callable[[str], Awaitable[None]],
    go_on: Callable[[str], Awaitable[None]],
    answer_deferred: Callable[[ConversationKey], Awaitable[None]],
) -> dict[str, Callable[..., Awaitable[None]]]:
    """The handlers of Slack's jobs, for `TurnJobs.register` in every process that runs a worker."""

    async def event(*, event_id: str) -> None:
        await answer_event(event_id)

    async def resume(*, request_id: str) -> None:
        await go_on(request_id)

    async def deferred(*, workspace: str, channel: str, thread: str) -> None:
        await answer_deferred(
            ConversationKey(platform="slack", workspace=workspace, channel=channel, thread=thread)
        )

    return {EVENT_JOB: event, RESUME_JOB: resume, DEFERRED_JOB: deferred}

"""A front end's share of the jobs on PostgreSQL (`bot.jobs`; none on SQLite): open, queue, run, drain.

Each platform has three kinds of job, named `<platform>.<kind>`: `event` answers a delivery recorded in
the inbox, `resume` goes on with a parked turn, `deferred` answers the messages that waited behind one.

A platform's schedules add a fourth, on a queue of its own (`schedule_job_name`): each due slot is one
job (`slot_jobs`, the schedule runner's `jobs`) whose queueing lock is the run's, so every runner, look
and re-delivery queues one; whichever process's worker is free runs it through its runner's `run_slot`
(`job_handlers(..., run_slot=...)`). Its own queue, because only a process with a runner for the
platform can run it: one that answers the platform's turns without (an older version, mid-upgrade)
never takes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from adapters.common.tasks import Spawn
from bot.config import Settings
from bot.errors import StoreError
from bot.jobs import JobHandler, open_configured_jobs
from bot.types import ConversationKey

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

EVENT = "event"
RESUME = "resume"
DEFERRED = "deferred"
# The work of a job, run in this process instead when there are no jobs.
Here = Callable[[], Coroutine[Any, Any, None]]


def job_name(platform: str, kind: str) -> str:
    return f"{platform}.{kind}"


def schedule_job_name(platform: str) -> str:
    """The job of one schedule slot: its queue is `<deployment>-<platform>-schedules`."""
    return f"{platform}-schedules.slot"


def slot_lock(schedule_id: str, slot: float) -> str:
    """The queueing lock of one slot's job, also its lock: one job of a slot waits or runs at a time."""
    return f"schedule:{schedule_id}:{slot:.0f}"


# Below people's messages, decisions and deferred turns (0): a burst of runs due at one instant
# ("every weekday at 09:00") fills free workers only as no person's message waits.
SLOT_PRIORITY = -1


class SlotQueue:
    """A platform's schedule slots as jobs (the schedule runner's `jobs`)."""

    def __init__(self, jobs: TurnJobs, platform: str) -> None:
        self._jobs = jobs
        self._name = schedule_job_name(platform)

    async def defer(self, schedule_id: str, slot: float) -> bool:
        """False when the slot's job is waiting or running already; StoreError when the jobs cannot
        be reached. (procrastinate refuses a second waiting job only: one queued while the first runs,
        before its claim, waits behind it and then finds its slot claimed.)"""
        lock = slot_lock(schedule_id, slot)
        if await self._jobs.pending(lock):
            return False
        payload = {"schedule_id": schedule_id, "slot": repr(slot)}
        return await self._jobs.enqueue(
            self._name, payload, event=lock, conversation=lock, priority=SLOT_PRIORITY
        )


def slot_jobs(jobs: TurnJobs | None, platform: str) -> SlotQueue | None:
    """The `jobs` of a platform's schedule runner: None without shared jobs (SQLite: runs in process)."""
    return None if jobs is None else SlotQueue(jobs, platform)


# A schedule runner's `run_slot`, which a slot's job calls.
RunSlot = Callable[[str, float], Awaitable[object]]


def event_lock(platform: str, event_id: str) -> str:
    """The queueing lock of a delivery's job: one waiting job per event, across platforms."""
    return f"{platform}:{event_id}"


class Launcher:
    """Where a platform's work runs: as a job any process takes (PostgreSQL), or a task here (SQLite)."""

    def __init__(self, jobs: TurnJobs | None, spawn: Spawn, platform: str) -> None:
        self.jobs = jobs
        self._spawn = spawn
        self._platform = platform
        self._task = f"{platform}-turn"
        # The platform's schedule runner's `jobs` (`agent.schedule_runner(..., jobs=launcher.slots)`).
        self.slots = slot_jobs(jobs, platform)

    async def event(self, event_id: str, key: ConversationKey, here: Here) -> None:
        await self._launch(here, EVENT, {"event_id": event_id}, event_lock(self._platform, event_id), key)

    async def resume(self, request_id: str, key: ConversationKey | None, here: Here) -> None:
        lock = f"{self._platform}:resume:{request_id}"
        await self._launch(here, RESUME, {"request_id": request_id}, lock, key)

    async def deferred(self, key: ConversationKey, here: Here) -> None:
        payload = {"workspace": key.workspace, "channel": key.channel, "thread": key.thread}
        await self._launch(here, DEFERRED, payload, f"{self._platform}:deferred:{key}", key)

    async def _launch(
        self, here: Here, kind: str, payload: dict[str, str], lock: str, key: ConversationKey | None
    ) -> None:
        """Queue the job, or run `here()` in this process (no jobs, or a request of no conversation)."""
        if self.jobs is None or key is None:
            self._spawn(here(), self._task)
        else:
            await self._queue(kind, payload, lock, key)

    async def requeue(self, event_id: str, key: ConversationKey) -> bool:
        """Queue an event with no job (its process died before queueing it); True if queued now."""
        assert self.jobs is not None
        lock = event_lock(self._platform, event_id)
        if await self.jobs.pending(lock):
            return False
        return await self._queue(EVENT, {"event_id": event_id}, lock, key)

    async def _queue(self, kind: str, payload: dict[str, str], lock: str, key: ConversationKey) -> bool:
        assert self.jobs is not None
        name = job_name(self._platform, kind)
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
    platform: str,
    answer_event: Callable[[str], Awaitable[None]],
    go_on: Callable[[str], Awaitable[None]],
    answer_deferred: Callable[[ConversationKey], Awaitable[None]],
    *,
    run_slot: RunSlot | None = None,
) -> dict[str, JobHandler]:
    """The handlers of a platform's jobs, for `TurnJobs.register` in every process that runs them;
    with `run_slot` (the platform's schedule runner's), its schedule slots' too. `run_slot` must
    return only once the run has ended: a job that ends sooner is not handed on if its process dies."""

    def deferred(*, workspace: str, channel: str, thread: str) -> Awaitable[None]:
        return answer_deferred(
            ConversationKey(platform=platform, workspace=workspace, channel=channel, thread=thread)
        )

    handlers: dict[str, JobHandler] = {
        job_name(platform, EVENT): lambda *, event_id: answer_event(event_id),
        job_name(platform, RESUME): lambda *, request_id: go_on(request_id),
        job_name(platform, DEFERRED): deferred,
    }
    if run_slot is not None:
        handlers |= schedule_handlers(platform, run_slot)
    return handlers


def schedule_handlers(platform: str, run_slot: RunSlot) -> dict[str, JobHandler]:
    """The handler of a platform's schedule slots' jobs: its runner's `run_slot`, awaited to the end."""

    async def slot(*, schedule_id: str, slot: str) -> None:
        await run_slot(schedule_id, float(slot))

    return {schedule_job_name(platform): slot}


class RunsJobs(Protocol):
    """A front end whose platform's jobs this process's worker runs."""

    def job_handlers(self) -> dict[str, JobHandler]: ...


class Drains(Protocol):
    async def drain(self, grace: float) -> None: ...


@asynccontextmanager
async def shared_jobs(settings: Settings) -> AsyncIterator[TurnJobs | None]:
    """The jobs every process on NERVE_DATABASE_URL shares, for the block; None on SQLite."""
    jobs = await open_configured_jobs(settings)
    try:
        yield jobs
    finally:
        if jobs is not None:
            await jobs.aclose()


def work(jobs: TurnJobs, front: RunsJobs, settings: Settings) -> None:
    for name, handler in front.job_handlers().items():
        jobs.register(name, handler)
    jobs.run_worker(settings.nerve_worker_concurrency)


async def drained(front: Drains, jobs: TurnJobs | None, grace: float) -> None:
    """SIGTERM: what runs gets `grace` seconds; the worker's cut-off jobs go back for another process."""
    if jobs is None:
        await front.drain(grace)
        return
    await asyncio.gather(front.drain(grace), jobs.drain(grace))

"""Running one due slot exactly once: claimed, or taken over from a process that stopped, under its lock.

A run is held under the store's turn lock, named after the run, from before its claim until after
its outcome is written. So a run found "running" whose lock can be taken was claimed by a process
that stopped before finishing it: it is then started again here, as a turn left by a stopped process
goes on (its message is the slot's, so the turn goes on in the same message and a front end answers
under the post it kept with the run, never a second one). A run still unfinished a grace after its
slot is recorded as failed ("nerve stopped during this run") instead of being handed on for ever.

Apart from the runner's looks (`bot.schedules.runner`) because this is the part every way a run
begins shares: a slot a look found due, a run a stopped process left, and a slot's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Literal

from bot.observe import metrics
from bot.schedules.slots import Clock, RunOutcome, Start, Started, run_lock_key
from bot.seams import TurnLock
from bot.store.schedules import ScheduleLedger
from bot.types import Schedule

logger = logging.getLogger(__name__)

# The note of a run whose process stopped before it finished: it is not run again.
STOPPED = "nerve stopped during this run"
# A run handed on this many times (every process that took it stopped during it) is not again.
MAX_HAND_ONS = 3
STOPPED_TOO_OFTEN = f"nerve stopped during this run {MAX_HAND_ONS + 1} times; it is not run again"

# How a run begins under its lock: claimed as due, taken over from a stopped process, or (a job,
# which may be a retry after its worker died) claimed, else taken over.
Begin = Literal["claim", "take_over", "claim_or_take_over"]


class SlotRuns:
    """The runs one runner has under way, each in a task of its own so a slow run holds no other.

    `freed` is called each time a run ends, so a look that left a due slot for want of a free place
    can look again at once."""

    def __init__(
        self,
        ledger: ScheduleLedger,
        start: Start,
        *,
        locks: TurnLock,
        clock: Clock,
        grace: float,
        freed: Callable[[], None],
    ) -> None:
        self._ledger = ledger
        self._start = start
        self._locks = locks
        self._clock = clock
        self._grace = grace
        self._freed = freed
        # The runs started here that have not ended, by (schedule, slot).
        self.under_way: dict[tuple[str, float], asyncio.Task[None]] = {}

    def launch(
        self, schedule: Schedule, slot: float, *, handed_on: bool = False
    ) -> asyncio.Future[float | None]:
        """Start one run in its own task; the future says, once claimed (or, `handed_on`, taken over),
        how late it started (None: another runner had it, or the schedule is no longer active)."""
        claimed: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        key = (schedule.id, slot)
        running = self._run(schedule, slot, claimed, begin="take_over" if handed_on else "claim")
        task = asyncio.create_task(running, name=f"schedule-{schedule.id}")
        self.under_way[key] = task

        def ended(done: asyncio.Task[None]) -> None:
            self.under_way.pop(key, None)
            self._freed()
            if not claimed.done():
                claimed.set_result(None)
            if not done.cancelled() and (error := done.exception()) is not None:
                # Before its claim (the store unreachable): the slot is looked at again next time.
                logger.error("schedule %s: the slot at %s could not be run: %s", schedule.id, slot, error)

        task.add_done_callback(ended)
        return claimed

    async def run_job(self, schedule: Schedule, slot: float) -> Started | None:
        """A slot's job, here and now: claimed, else taken over (see `ScheduleRunner.run_slot`)."""
        claimed: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        await self._run(schedule, slot, claimed, begin="claim_or_take_over")
        late_by = claimed.result() if claimed.done() else None
        return None if late_by is None else Started(schedule, slot, late_by)

    async def _run(
        self, schedule: Schedule, slot: float, claimed: asyncio.Future[float | None], *, begin: Begin
    ) -> None:
        async with self._locks.hold(run_lock_key(schedule.id, slot)):
            late_by = await self._begin(schedule, slot, begin)
            if not claimed.done():  # (its look may have been cancelled meanwhile, at a stop)
                claimed.set_result(late_by)
            if late_by is None:
                return
            try:
                outcome = await self._start(schedule, slot, late_by)
            except asyncio.CancelledError:
                # This process is stopping: the run stays "running", and the next runner to look (here
                # after a restart, or another process) hands it on; it goes on in the same message.
                logger.info(
                    "schedule %s: the run of the slot at %s is left to be handed on", schedule.id, slot
                )
                raise
            except Exception as exc:
                logger.exception("schedule %s: the run of the slot at %s failed", schedule.id, slot)
                outcome = RunOutcome("failed", f"the run failed: {exc}"[:500])
            # Written even when a stop comes now: the turn ended, and its outcome is not handed on.
            finishing = asyncio.ensure_future(self._finish(schedule.id, slot, outcome))
            try:
                await asyncio.shield(finishing)
            except asyncio.CancelledError:
                await finishing
                raise

    async def _begin(self, schedule: Schedule, slot: float, begin: Begin) -> float | None:
        """Under the run's lock: how late the run starts, or None when it is not to run here."""
        if begin == "take_over":
            return await self._take_over(schedule, slot)
        if begin == "claim_or_take_over" and self._clock() - slot > self._grace:
            # A job that waited beyond the grace (every worker busy, or down): its slot is missed, as
            # a look would have found it, never run in a burst after an outage.
            if schedule.status == "active" and await self._ledger.record_missed(
                schedule.id, slot, at=self._clock()
            ):
                metrics.schedule_run("missed")
                logger.info("schedule %s: the slot at %s was missed (queued too long)", schedule.id, slot)
                return None
            return await self._take_over(schedule, slot)  # a run left "running" is recorded failed
        late_by = await self._claim(schedule, slot)
        if late_by is None and begin == "claim_or_take_over":
            # Claimed before: a run still "running" whose lock this holds was left by a process that
            # stopped (a job's earlier attempt); any other row, or none (an ended schedule), is no run.
            return await self._take_over(schedule, slot)
        return late_by

    async def _claim(self, schedule: Schedule, slot: float) -> float | None:
        """Claim a due slot: how late it starts, or None when another runner had it first."""
        at = self._clock()
        late_by = max(0.0, at - slot)
        if not await self._ledger.claim_slot(schedule.id, slot, at=at, late_by=late_by):
            return None
        metrics.schedule_lateness(late_by)
        logger.info("schedule %s: running the slot at %s, %.0f s late", schedule.id, slot, late_by)
        return late_by

    async def _take_over(self, schedule: Schedule, slot: float) -> float | None:
        """Under the run's lock: take over a run its process left, if it is still unfinished and its
        schedule still active; one left for longer than the grace is recorded failed instead."""
        run = await self._ledger.run(schedule.id, slot)
        if run is None or run.status != "running":
            return None  # finished meanwhile, by whoever held it
        current = await self._ledger.schedule(schedule.id)
        too_late = self._clock() - slot > self._grace
        if current is None or current.status != "active" or too_late:
            await self._finish(schedule.id, slot, RunOutcome("failed", STOPPED))
            logger.warning("schedule %s: %s (slot %s)", schedule.id, STOPPED, slot)
            return None
        if run.hand_ons >= MAX_HAND_ONS:
            # Each process that took it stopped during it: the run itself is the likely cause, and
            # handing it on again would take down the next process too.
            await self._finish(schedule.id, slot, RunOutcome("failed", STOPPED_TOO_OFTEN))
            logger.error("schedule %s: %s (slot %s)", schedule.id, STOPPED_TOO_OFTEN, slot)
            return None
        await self._ledger.count_hand_on(schedule.id, slot)
        logger.warning(
            "schedule %s: handing on the run of the slot at %s, left by a stopped process", schedule.id, slot
        )
        metrics.schedule_run("handed_on")
        return run.late_by

    async def _finish(self, schedule_id: str, slot: float, outcome: RunOutcome) -> None:
        at = self._clock()
        if await self._ledger.finish_run(schedule_id, slot, outcome.status, at=at, note=outcome.note):
            metrics.schedule_run(outcome.status)

    async def stop(self) -> None:
        """Stop the runs under way (each left to be handed on) and wait for them to end."""
        tasks = list(self.under_way.values())
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    async def wait(self) -> None:
        """Until the runs started so far have ended."""
        while self.under_way:
            await asyncio.gather(*list(self.under_way.values()), return_exceptions=True)

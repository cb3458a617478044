"""Running schedules' due slots, each exactly once, whichever process and however often it looks.

A `ScheduleRunner` looks at the active schedules (`tick`), asks `timing.due` what came due since the
last slot claimed or recorded missed, records the slots too old to run as missed, and claims the one
slot to run (the store's `claim_slot`: one row per (schedule, slot), so across any number of runners,
processes and restarts exactly one caller gets it). The front end's `start` then runs the turn, in a
task of its own so a slow run holds no other; how it ended is written with `finish_run`.

Each run is held under its own lock from before its claim until after its outcome is written, so a
run found "running" whose lock can be taken was left by a process that stopped: `hand_on` starts it
again here, in the same message (`bot.schedules.runs`, which runs each slot exactly once). A stopped
process's lock lapses with its lease on SQLite (NERVE_TURN_LEASE, 20 s), with its sessions on
PostgreSQL; until then `hand_on` waits, as it does for a live process's run.

With `jobs` (PostgreSQL: `SlotJobs`, procrastinate's jobs shared by every process on the database),
a look queues each due slot as one job instead of running it here: the job's queueing lock is the
run's, so any number of runners, looks and re-deliveries queue one, and whichever process's worker is
free runs it (`run_slot`): under the run's lock it claims the slot, or, finding it "running", takes
over the run its earlier attempt's process left (that process died: its lock went with it). A worker
that dies mid-run hands the run on as any job does: procrastinate's recovery puts the job back, and
`run_slot` goes on with it in the same message.

The clock and the sleep are passed in, so a test drives a simulated day with a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from bot.errors import StoreError
from bot.observe import metrics
from bot.schedules import timing
from bot.schedules.runs import SlotRuns
from bot.schedules.slots import DEFAULT_GRACE, Clock, Sleep, SlotJobs, Start, Started, Tick
from bot.seams import TurnLock
from bot.store.locks import KeyedLocks
from bot.store.schedules import ENDED_BY_NERVE, ScheduleLedger
from bot.types import Schedule

logger = logging.getLogger(__name__)
# At most this many of one schedule's passed slots are recorded as missed in one look.
MISSED_KEPT = 50

# Seconds between two looks at the schedules (a new schedule wakes the runner at once).
CADENCE = 15.0
# Seconds past a slot's time the runner looks, so that a clock read a hair early finds it due.
DUE_MARGIN = 0.05
# Runs one runner has under way at most: each holds a turn-lock session besides its turn's, so a
# burst of slots due at once waits for a free place (the runner looks again as each run ends) rather
# than taking every connection. Within the turn gate's default, so scheduled runs never crowd out people.
MAX_RUNNING = 8


class ScheduleRunner:
    """Runs the due slots of the schedules `mine` accepts (a front end runs its platform's).

    `locks` is the store's turn lock when processes share the store, so that `hand_on` can tell a
    run of a live process from one whose process stopped; in memory otherwise. With `jobs`, due
    slots are queued as jobs instead of run here, and each job calls `run_slot`."""

    def __init__(
        self,
        ledger: ScheduleLedger,
        start: Start,
        *,
        locks: TurnLock | None = None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        grace: float = DEFAULT_GRACE,
        cadence: float = CADENCE,
        mine: Callable[[Schedule], bool] = lambda schedule: True,
        max_running: int = MAX_RUNNING,
        jobs: SlotJobs | None = None,
    ) -> None:
        self._ledger = ledger
        self._jobs = jobs
        self._clock = clock
        self._sleep = sleep
        self._grace = grace
        self._cadence = cadence
        self._mine = mine
        self._max_running = max_running
        # Set when a schedule was added or resumed: the runner looks at once instead of at its cadence.
        self.wake = asyncio.Event()
        # Set when a look left a due slot for want of a free place (`max_running` under way).
        self._waiting = False
        # The runs this runner started, each claimed (or taken over) and run under its lock.
        lock: TurnLock = locks if locks is not None else KeyedLocks()
        self._runs = SlotRuns(ledger, start, locks=lock, clock=clock, grace=grace, freed=self._freed)

    @property
    def running(self) -> int:
        return len(self._runs.under_way)

    async def tick(self) -> Tick:
        """One look: record what is too old as missed, start what is due (each in its own task; with
        jobs, queue it), and end recurring schedules whose rule ran out. Returns once each due run is
        claimed or refused (with jobs: queued, or found queued already)."""
        now = self._clock()
        found = Tick()
        self._waiting = False
        active = await self._ledger.active_schedules()
        metrics.schedules_active(len(active))
        claims: list[tuple[Schedule, float, asyncio.Future[float | None]]] = []
        for schedule in filter(self._mine, active):
            try:
                await self._look_at(schedule, now, found, claims)
            except StoreError:
                raise  # the store is away: everyone's look, not this schedule's
            except Exception:
                # One schedule the runner cannot work out (its zone unknown to this machine's zone
                # data) costs its own slot this look, never everyone's.
                logger.exception(
                    "schedule %s: looking at it failed; it is looked at again next time", schedule.id
                )
        for schedule, slot, claimed in claims:
            late_by = await claimed
            if late_by is not None:
                found.started.append(Started(schedule, slot, late_by))
        return found

    async def _look_at(
        self,
        schedule: Schedule,
        now: float,
        found: Tick,
        claims: list[tuple[Schedule, float, asyncio.Future[float | None]]],
    ) -> None:
        """One schedule in a look: its missed slots recorded, its due slot claimed (or queued), its
        next slot noted, or its end recorded."""
        # Expanding a rule can take a while (a COUNT walked from its first slot, a year away from a
        # five-minute rule): off the event loop, so turns and leases go on meanwhile.
        missed, slot = await asyncio.to_thread(
            timing.due,
            schedule.first_at,
            schedule.rule,
            schedule.timezone,
            await self._looked_after(schedule),
            now,
            self._grace,
        )
        if len(missed) > MISSED_KEPT:
            # Only the newest are recorded: `due` looks after the newest slot recorded, so the
            # older ones are never offered again, and a long absence costs no burst of writes.
            logger.info(
                "schedule %s: %d slots passed unrun; recording the newest %d as missed",
                schedule.id,
                len(missed),
                MISSED_KEPT,
            )
            missed = missed[-MISSED_KEPT:]
        for passed in missed:
            if await self._ledger.record_missed(schedule.id, passed, at=now):
                metrics.schedule_run("missed")
                found.missed.append((schedule, passed))
                logger.info("schedule %s: the slot at %s was missed", schedule.id, passed)
        busy = len(self._runs.under_way) >= self._max_running
        if slot is not None and self._jobs is not None:
            if await self._queue(schedule, slot):
                found.queued.append(Started(schedule, slot, max(0.0, now - slot)))
        elif slot is not None:
            if (schedule.id, slot) not in self._runs.under_way and not busy:
                claims.append((schedule, slot, self._runs.launch(schedule, slot)))
            elif busy:
                self._waiting = True
        elif coming := await asyncio.to_thread(
            timing.next_slots, schedule.first_at, schedule.rule, schedule.timezone, now, 1
        ):
            found.next_due = min(coming[0], found.next_due or coming[0])
        elif not missed and not schedule.once:
            await self._end_if_over(schedule, now)
        elif (
            not missed
            and schedule.first_at <= now
            # A once schedule whose only slot passed while it was paused: missed (and so done),
            # never left active for good. A slot being run is held by its row: this records nothing.
            and await self._ledger.record_missed(schedule.id, schedule.first_at, at=now)
        ):
            metrics.schedule_run("missed")
            found.missed.append((schedule, schedule.first_at))

    async def _looked_after(self, schedule: Schedule) -> float | None:
        """Where `due` looks from: the newest slot claimed or missed, or a resume after it (the slots
        that passed while a schedule was paused are neither run nor missed)."""
        latest = await self._ledger.latest_slot(schedule.id)
        marks = [mark for mark in (latest, schedule.changed_at) if mark is not None]
        if latest is None:
            # Confirmed after its first time had passed: the slot that was due when it was made runs
            # (late); those before it fell before the schedule existed, so they are not "missed".
            first, rule, zone = schedule.first_at, schedule.rule, schedule.timezone
            made = timing.slots_between(first, rule, zone, first - 1, schedule.created_at)
            marks.extend(made[-2:-1])
        return max(marks) if marks else None

    async def _queue(self, schedule: Schedule, slot: float) -> bool:
        """Queue a due slot's job; False when it was queued already or the jobs cannot be reached
        (the next look queues it: it stays due until it is claimed)."""
        assert self._jobs is not None
        try:
            queued = await self._jobs.defer(schedule.id, slot)
        except StoreError as exc:
            logger.warning("schedule %s: the slot at %s could not be queued: %s", schedule.id, slot, exc)
            return False
        if queued:
            logger.info("schedule %s: the slot at %s is queued", schedule.id, slot)
        return queued

    async def _end_if_over(self, schedule: Schedule, now: float) -> None:
        """A recurring schedule whose rule has no slot left (its UNTIL or COUNT reached) is done, once
        its last run has ended (it may be under way in another process, or left by a stopped one to
        be handed on: ended now, it would be recorded failed instead)."""
        if timing.next_slots(schedule.first_at, schedule.rule, schedule.timezone, now, 1):
            return
        if any(key[0] == schedule.id for key in self._runs.under_way):
            return
        latest = await self._ledger.latest_slot(schedule.id)
        last = None if latest is None else await self._ledger.run(schedule.id, latest)
        if last is None or last.status != "running":
            await self._ledger.set_schedule_status(schedule.id, "done", by=ENDED_BY_NERVE, at=now)

    def _freed(self) -> None:
        """A run ended: its place is free for a due slot a look left waiting."""
        if self._waiting:
            # A due slot waits for a free place: look again now, not at the next cadence, so a
            # burst (everyone's "every weekday at 09:00") runs at the pace its runs end.
            self._waiting = False
            self.wake.set()

    async def run_slot(self, schedule_id: str, slot: float) -> Started | None:
        """The job of one slot, run in whichever process's worker took it: under the run's lock, claim
        the slot, or take over its run left "running" by an earlier attempt whose process died (within
        the grace; else it is recorded failed); then run it here and write how it ended. None when
        there was nothing to run: the slot ran or was missed already (or is now: its job waited
        beyond the grace), or its schedule is no longer active. Cancelled (a drain), the run stays
        "running" for the job's next attempt to go on with; a store failure before the claim raises
        (the slot stays due, and a later look queues it)."""
        schedule = await self._ledger.schedule(schedule_id)
        if schedule is None or not self._mine(schedule):
            return None
        return await self._runs.run_job(schedule, slot)

    async def hand_on(self) -> list[Started]:
        """The runs found "running" that no live process holds (their process stopped) are started
        again here and returned, as a turn left by a stopped process goes on; those left longer than
        the grace after their slot are recorded as failed (`runs.STOPPED`) instead. A run another live
        process holds is waited for (it finishes it itself), so call this in a task of its own when
        other processes may run. With jobs, such a run with no job waiting or running is queued
        again instead (returned as handed on), and its job takes it over in whichever process."""
        taken: list[Started] = []
        for run in await self._ledger.running_runs(older_than=self._clock()):
            if (run.schedule_id, run.slot) in self._runs.under_way:
                continue
            schedule = await self._ledger.schedule(run.schedule_id)
            if schedule is None or not self._mine(schedule):
                continue
            if self._jobs is not None:
                # Its job, if its process died, is put back by the jobs' recovery; one with no job
                # (it failed after the claim, say when the outcome could not be written) is queued
                # again, and takes the run over once no live process holds it.
                if await self._queue(schedule, run.slot):
                    taken.append(Started(schedule, run.slot, run.late_by))
                continue
            late_by = await self._runs.launch(schedule, run.slot, handed_on=True)
            if late_by is not None:
                taken.append(Started(schedule, run.slot, late_by))
        return taken

    async def run_forever(self, on_tick: Callable[[Tick], Awaitable[None]] | None = None) -> None:
        """Look every `cadence` seconds (at once when `wake` is set) until cancelled, handing on, in a
        task of its own, the runs stopped processes left; the runs under way here are then stopped
        and left to be handed on. A look that fails (the store unreachable) is logged and tried
        again at the next one."""
        handing_on: asyncio.Task[list[Started]] | None = None
        try:
            while True:
                self.wake.clear()
                if handing_on is None or handing_on.done():
                    handing_on = asyncio.create_task(self._hand_on_logged(on_tick), name="schedules-hand-on")
                next_due: float | None = None
                try:
                    found = await self.tick()
                    next_due = found.next_due
                    if on_tick is not None:
                        await on_tick(found)
                except StoreError as exc:
                    # The store's own outage line says it is away (once, at WARNING): no traceback.
                    logger.info(
                        "could not look at the schedules (%s); trying again in %g s", exc, self._cadence
                    )
                except Exception:
                    logger.exception("looking at the schedules failed; trying again in %g s", self._cadence)
                await self._pause(next_due)
        finally:
            if handing_on is not None:
                handing_on.cancel()
                await asyncio.gather(handing_on, return_exceptions=True)
            await self.stop()

    async def _hand_on_logged(self, on_tick: Callable[[Tick], Awaitable[None]] | None) -> list[Started]:
        try:
            taken = await self.hand_on()
            if taken and on_tick is not None:
                await on_tick(Tick(handed_on=taken))
            return taken
        except StoreError as exc:
            logger.info("could not look for runs left by a stopped process (%s); looking again later", exc)
            return []
        except Exception:
            logger.exception("looking for runs left by a stopped process failed; looking again later")
            return []

    async def _pause(self, next_due: float | None = None) -> None:
        """The cadence's sleep, or until just after `next_due` when that is sooner; cut short by `wake`."""
        delay = self._cadence
        if next_due is not None:
            delay = min(delay, max(0.0, next_due - self._clock()) + DUE_MARGIN)
        sleeping = asyncio.ensure_future(self._sleep(delay))
        woken = asyncio.ensure_future(self.wake.wait())
        try:
            await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleeping, woken):
                waiter.cancel()
            await asyncio.gather(sleeping, woken, return_exceptions=True)

    async def stop(self) -> None:
        """Stop the runs under way (each left to be handed on) and wait for them to end."""
        await self._runs.stop()

    async def wait_for_runs(self) -> None:
        """Until the runs started so far have ended (a test's, or a front end's before it leaves)."""
        await self._runs.wait()

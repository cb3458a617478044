"""Schedules on PostgreSQL: each due slot is one procrastinate job whose queueing lock is the run's
(schedule, slot), run by whichever process's worker is free (`ScheduleRunner(jobs=...)`,
`adapters.jobs_runtime.slot_jobs`, the job calling the runner's `run_slot`).

Several runners, looks and re-deliveries queue one job per slot and run it once; a job whose worker
was SIGKILLed mid-run (or cut off by a drain) is run again by another process's worker, which takes
the run over (started once more, in the same message) and finishes it; three processes with real
workers running ten schedules over a span of fake time, one of them killed mid-way, run every slot
exactly once; a schedule cancelled while its run is in flight gets no later run, even from a job
queued for it.

Each test gets a schema of its own on NERVE_TEST_DATABASE_URL (tests/stores.py); when that server
cannot be reached the tests fail. The runners' clocks are fake: a process's clock is set by the test
at each look, so all of them look at the same moments; only waits for other processes are bounded by
(generous) timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from adapters import jobs_runtime
from adapters.common.tasks import Owned
from adapters.settings import Settings
from bot.jobs import JobHandler, TurnJobs, open_turn_jobs
from bot.schedules import timing
from bot.schedules.runner import ScheduleRunner
from bot.schedules.slots import RunOutcome
from bot.store.base import ConversationStore
from bot.types import Schedule
from tests.fakes.clock import Clock
from tests.stores import PostgresBackend, postgres_backend
from tests.test_jobs import start_worker
from tests.test_schedule_facade import agent_on
from tests.test_schedule_runner import HOUR, NOW, Runs, a_schedule

REPO = Path(__file__).resolve().parent.parent
PLATFORM = "test"
# Short, so that a killed worker's job is run again within a few seconds.
STALL = 2.0
# Liveness bounds for what other processes and workers do: far above what they take.
WITHIN = 30.0
Slot = tuple[str, float]


@pytest.fixture
async def pg() -> AsyncIterator[PostgresBackend]:
    async with postgres_backend() as backend:
        yield backend


@dataclass
class Node:
    """One nerve process's share, in this process: its store, its jobs and its schedule runner."""

    store: ConversationStore
    jobs: TurnJobs
    runner: ScheduleRunner


@contextlib.asynccontextmanager
async def node(pg: PostgresBackend, runs: Runs, clock: Clock) -> AsyncIterator[Node]:
    """A runner whose slots are jobs, and the handler of those jobs registered, as a front end's (its
    worker started by `start_worker`)."""
    store = await pg.open()
    try:
        # Polling often: a job queued before the worker listens is found at once all the same.
        jobs = await open_turn_jobs(pg.location, stall_timeout=STALL, poll_interval=0.2)
        try:
            slots = jobs_runtime.slot_jobs(jobs, PLATFORM)
            runner = ScheduleRunner(store, runs, locks=store.turn_lock, clock=clock, jobs=slots)
            for name, handler in jobs_runtime.schedule_handlers(PLATFORM, runner.run_slot).items():
                jobs.register(name, handler)
            yield Node(store, jobs, runner)
        finally:
            await jobs.aclose()
    finally:
        await store.close()


async def queued_jobs(pg: PostgresBackend) -> list[tuple[str, str]]:
    """(queueing lock, status) of the jobs waiting or running (one that succeeded is deleted)."""
    waiting = "SELECT queueing_lock, status FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
    rows = await pg.rows(waiting)
    return [(lock, status) for lock, status in rows]


async def run_rows(pg: PostgresBackend) -> dict[Slot, str]:
    rows = await pg.rows("SELECT schedule_id, slot, status FROM schedule_runs")
    return {(sid, float(slot)): status for sid, slot, status in rows}


async def until(what: str, done: Callable[[], Any], within: float = WITHIN) -> None:
    """Until `await done()` is true (what other processes or workers do, looked at every 20 ms)."""
    try:
        async with asyncio.timeout(within):
            while not await done():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    except TimeoutError:
        pytest.fail(f"gave up waiting {within} s for {what}")


async def answered(pg: PostgresBackend, slots: set[Slot], unless: Callable[[], set[Slot]] = set) -> None:
    """Until each of `slots` was answered, but those `unless()` says are stuck (it is asked again at
    each look)."""

    async def done() -> bool:
        rows = await run_rows(pg)
        stuck = unless()
        return all(rows.get(slot) == "answered" or slot in stuck for slot in slots)

    await until(f"the runs of {sorted(slots)} to be answered", done)


async def no_jobs_left(pg: PostgresBackend) -> None:
    async def done() -> bool:
        return not await queued_jobs(pg)

    await until("every job to end", done)


def due(schedules: list[Schedule], until_: float) -> set[Slot]:
    return {
        (s.id, slot)
        for s in schedules
        for slot in timing.slots_between(s.first_at, s.rule, s.timezone, NOW - HOUR, until_)
    }


# --- several runners, one job per slot ------------------------------------------------------------


async def test_runners_on_one_database_queue_one_job_per_due_slot_and_each_runs_once(
    pg: PostgresBackend,
) -> None:
    schedules = [a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW + i * 7) for i in range(4)]
    schedules.append(a_schedule("", NOW + 30))
    clock, runs = Clock(NOW + 60), Runs()
    async with node(pg, runs, clock) as a, node(pg, runs, clock) as b, node(pg, runs, clock) as c:
        for schedule in schedules:
            await a.store.add_schedule(schedule)
        # Three processes look at the same moment, then again (a look repeated, as after a restart).
        looks = await asyncio.gather(*(n.runner.tick() for n in (a, b, c)))
        again = await asyncio.gather(*(n.runner.tick() for n in (a, b, c)))

        first = due(schedules, clock.now)
        assert sorted(await queued_jobs(pg)) == sorted(
            (jobs_runtime.slot_lock(sid, slot), "todo") for sid, slot in first
        )
        queued = [(q.schedule.id, q.slot) for look in looks for q in look.queued]
        assert sorted(queued) == sorted(first)  # each by one runner only
        assert [look.queued for look in again] == [[], [], []]

        for n in (a, b, c):
            await start_worker(n.jobs)
        await answered(pg, first)
        # The next slots, looked at by all three again.
        clock.now = NOW + 400
        await asyncio.gather(*(n.runner.tick() for n in (a, b, c)))
        second = due(schedules, clock.now)
        await answered(pg, second)
        await no_jobs_left(pg)

    assert Counter((sid, slot) for sid, slot, _ in runs.started) == Counter(second)
    assert set((await run_rows(pg)).values()) == {"answered"}


async def test_a_slot_queued_again_adds_nothing(pg: PostgresBackend) -> None:
    schedule = a_schedule("FREQ=DAILY", NOW)
    clock, runs = Clock(NOW + 5), Runs()
    async with node(pg, runs, clock) as one:
        await one.store.add_schedule(schedule)
        slots = jobs_runtime.slot_jobs(one.jobs, PLATFORM)
        assert slots is not None
        assert await slots.defer(schedule.id, NOW)
        assert not await slots.defer(schedule.id, NOW)  # re-delivered while it waits
        assert (await one.runner.tick()).queued == []  # a look finds it queued
        assert await queued_jobs(pg) == [(jobs_runtime.slot_lock(schedule.id, NOW), "todo")]

        await start_worker(one.jobs)
        await answered(pg, {(schedule.id, NOW)})
        await no_jobs_left(pg)
        # Delivered again after it ran: a job is queued (procrastinate's lock is on waiting jobs
        # only), and runs, but claims nothing, so nothing starts.
        assert await slots.defer(schedule.id, NOW)
        await no_jobs_left(pg)
        assert (await one.runner.tick()).queued == []

    assert runs.started == [(schedule.id, NOW, 5.0)]
    assert await run_rows(pg) == {(schedule.id, NOW): "answered"}


async def test_a_front_ends_worker_runs_its_schedules_jobs_through_the_hook(pg: PostgresBackend) -> None:
    """What a front end adds: its runner's `jobs` from its launcher, its runner's `run_slot` among its
    job handlers; then `work` (as `nerve slack`, `nerve discord` and `nerve worker` call it) has the
    worker run the slots' jobs, on a queue of their own, apart from the platform's turns."""
    schedule = a_schedule("FREQ=DAILY", NOW)
    runs = Runs()
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, nerve_database_url=SecretStr(pg.location), nerve_worker_stall_timeout=STALL
    )
    async with jobs_runtime.shared_jobs(settings) as jobs:
        assert jobs is not None
        store = await pg.open()
        try:
            await store.add_schedule(schedule)
            agent = agent_on(store)
            launcher = jobs_runtime.Launcher(jobs, Owned().spawn, PLATFORM)

            class Front:
                runner = agent.schedule_runner(runs, mine=bool, jobs=launcher.slots, clock=Clock(NOW))

                def job_handlers(self) -> dict[str, JobHandler]:
                    return jobs_runtime.job_handlers(
                        PLATFORM, _unused, _unused, _unused, run_slot=self.runner.run_slot
                    )

            front = Front()
            jobs_runtime.work(jobs, front, settings)
            turns = jobs.queue_of(jobs_runtime.job_name(PLATFORM, jobs_runtime.EVENT))
            assert jobs.queue_of(jobs_runtime.schedule_job_name(PLATFORM)) == f"{turns}-schedules"
            assert [q.slot for q in (await front.runner.tick()).queued] == [NOW]
            await answered(pg, {(schedule.id, NOW)})
        finally:
            await jobs.drain(0)
            await store.close()
    assert runs.started == [(schedule.id, NOW, 0.0)]


async def _unused(*_: object) -> None:
    raise AssertionError("no turn here")


async def test_a_slot_whose_job_waited_beyond_the_grace_is_missed_not_run(pg: PostgresBackend) -> None:
    """Queued before every worker stopped, found after an outage longer than the grace: recorded
    missed, as a look would, rather than run hours late."""
    schedule = a_schedule("FREQ=DAILY", NOW)
    clock, runs = Clock(NOW + 5), Runs()
    async with node(pg, runs, clock) as one:
        await one.store.add_schedule(schedule)
        assert len((await one.runner.tick()).queued) == 1
        clock.now = NOW + 2 * HOUR  # the grace is an hour
        await start_worker(one.jobs)
        await no_jobs_left(pg)

    assert runs.started == []
    assert await run_rows(pg) == {(schedule.id, NOW): "missed"}


# --- a worker that dies mid-run -------------------------------------------------------------------


@dataclass
class JobProcess:
    """A nerve process running schedules' jobs (`tests/schedule_job_proc.py`); what it printed."""

    name: str
    process: asyncio.subprocess.Process
    said: list[dict[str, Any]] = field(default_factory=list)
    heard: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def listen(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            async with self.heard:
                self.said.append(json.loads(line))
                self.heard.notify_all()

    async def told(self, event: str, after: int = 0) -> dict[str, Any]:
        """The first `event` it printed after its `after`th line, once it has."""

        def found() -> dict[str, Any] | None:
            return next((e for e in self.said[after:] if e["event"] == event), None)

        try:
            async with asyncio.timeout(WITHIN), self.heard:
                await self.heard.wait_for(lambda: found() is not None or self.process.returncode is not None)
        except TimeoutError:
            pytest.fail(f"{self.name} did not say {event!r} within {WITHIN} s; it said {self.said}")
        said = found()
        if said is None:
            pytest.fail(f"{self.name} ended without saying {event!r}; it said {self.said}")
        return said

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()

    async def tick(self, at: float) -> None:
        after = len(self.said)
        await self.send(f"tick {at!r}")
        await self.told("ticked", after)

    def runs(self, event: str) -> list[Slot]:
        return [(e["schedule"], e["slot"]) for e in self.said if e["event"] == event]


@contextlib.asynccontextmanager
async def job_processes(pg: PostgresBackend, *names: str) -> AsyncIterator[list[JobProcess]]:
    """Processes with a schedule runner and a worker each, ready; killed if still running after."""
    started = [
        JobProcess(
            name,
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.schedule_job_proc",
                pg.location,
                name,
                str(STALL),
                cwd=REPO,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            ),
        )
        for name in names
    ]
    listeners = [asyncio.create_task(p.listen()) for p in started]
    try:
        for process in started:
            await process.told("ready")
        yield started
    finally:
        for p in started:
            if p.process.returncode is None:
                p.process.kill()
            await p.process.wait()
        await asyncio.gather(*listeners)


@pytest.mark.parametrize("queued_again", [False, True], ids=["alone", "queued-again"])
async def test_a_run_whose_worker_died_is_handed_on_once_and_answered(
    pg: PostgresBackend, queued_again: bool
) -> None:
    """The job of a run whose process was SIGKILLed is put back and run by another process's worker:
    the run is started once more and answered. Also when the slot was queued again while its job
    ran (a look that raced the job's start): then that job takes the run over, and the dead one ends."""
    schedule = a_schedule("FREQ=DAILY", NOW)
    clock, runs = Clock(NOW + 20), Runs()
    lock = jobs_runtime.slot_lock(schedule.id, NOW)
    async with node(pg, runs, clock) as survivor:
        await survivor.store.add_schedule(schedule)
        async with job_processes(pg, "doomed") as [doomed]:
            await doomed.send("hang")
            await doomed.tick(NOW + 5)
            await doomed.told("hanging")
            if queued_again:
                payload = {"schedule_id": schedule.id, "slot": repr(NOW)}
                name = jobs_runtime.schedule_job_name(PLATFORM)
                assert await survivor.jobs.enqueue(name, payload, event=lock, conversation=lock)
            doomed.process.kill()
        # Its job is still "doing" under a worker that beats no more; its run is "running".
        assert (lock, "doing") in await queued_jobs(pg)
        assert await run_rows(pg) == {(schedule.id, NOW): "running"}
        # Its job will be handed on: a look queues nothing more.
        assert await survivor.runner.hand_on() == []
        assert (await survivor.runner.tick()).queued == []

        await start_worker(survivor.jobs)
        await answered(pg, {(schedule.id, NOW)})
        await no_jobs_left(pg)
        assert await survivor.runner.hand_on() == []

    assert doomed.runs("started") == [(schedule.id, NOW)]
    assert doomed.runs("finished") == []
    # Started again exactly once, as late as its first start (it goes on in the same message).
    assert runs.started == [(schedule.id, NOW, 5.0)]
    assert await run_rows(pg) == {(schedule.id, NOW): "answered"}
    ended = await pg.rows("SELECT status FROM procrastinate_jobs")
    assert ended == ([("aborted",)] if queued_again else [])


async def test_a_run_cut_off_by_a_drain_goes_on_in_another_process(pg: PostgresBackend) -> None:
    """SIGTERM's drain puts a running slot's job back (its grace over): the next process's worker
    takes the run over, started once more and answered."""
    schedule = a_schedule("FREQ=DAILY", NOW)
    clock, stopping, going_on = Clock(NOW + 5), Runs(), Runs()
    stopping.hold = asyncio.Event()  # never set: the run is under way when the drain comes
    async with node(pg, stopping, clock) as first, node(pg, going_on, clock) as second:
        await first.store.add_schedule(schedule)
        await start_worker(first.jobs)
        assert len((await first.runner.tick()).queued) == 1
        async with asyncio.timeout(WITHIN):
            await stopping.running.wait()
        await first.jobs.drain(0)
        assert await queued_jobs(pg) == [(jobs_runtime.slot_lock(schedule.id, NOW), "todo")]
        assert await run_rows(pg) == {(schedule.id, NOW): "running"}
        await start_worker(second.jobs)
        await answered(pg, {(schedule.id, NOW)})
        await no_jobs_left(pg)

    assert stopping.started == [(schedule.id, NOW, 5.0)]
    assert going_on.started == [(schedule.id, NOW, 5.0)]


async def test_three_processes_with_one_killed_run_every_slot_exactly_once(pg: PostgresBackend) -> None:
    """Ten schedules every five minutes over 40 minutes of fake time, looked at every 100 s by three
    processes at once; one is SIGKILLed mid-way during a run. No slot is missed, none run twice: the
    killed run is started once more by another process and answered."""
    schedules = [a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW + i * 23) for i in range(10)]
    store = await pg.open()
    try:
        for schedule in schedules:
            await store.add_schedule(schedule)
    finally:
        await store.close()
    last = NOW + 40 * 60
    async with job_processes(pg, "p1", "p2", "p3") as processes:
        victim = processes[0]
        live = list(processes)
        for step in range(25):
            at = NOW + step * 100
            if step == 10:
                await victim.send("hang")  # its next run never ends
            await asyncio.gather(*(p.tick(at) for p in live))
            await answered(pg, due(schedules, at), unless=lambda: set(victim.runs("hanging")))
            if victim.runs("hanging") and victim in live:
                victim.process.kill()  # mid-run, with nothing else under way there
                await victim.process.wait()
                live.remove(victim)
        expected = due(schedules, last)
        await answered(pg, expected)
        await no_jobs_left(pg)
        for p in live:
            assert p.process.stdin is not None
            p.process.stdin.close()
            assert await asyncio.wait_for(p.process.wait(), WITHIN) == 0

    assert victim not in live, "the process to kill never started a run after it was told to hang"
    [killed] = victim.runs("hanging")
    started = Counter(slot for p in processes for slot in p.runs("started"))
    finished = Counter(slot for p in processes for slot in p.runs("finished"))
    assert finished == Counter(expected)  # each slot answered exactly once, none missed
    assert started == Counter(expected) + Counter([killed])  # the killed run, started once more
    assert killed in victim.runs("started") and killed not in victim.runs("finished")
    assert len(expected) == 81  # the first schedule's nine slots (at NOW … NOW + 40 min), eight each
    rows = await run_rows(pg)
    assert set(rows) == expected and set(rows.values()) == {"answered"}


# --- cancelled during its run ---------------------------------------------------------------------


async def test_a_schedule_cancelled_while_its_run_is_in_flight_runs_no_more(pg: PostgresBackend) -> None:
    schedule = a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW)
    clock, runs = Clock(NOW), Runs()
    runs.hold = asyncio.Event()
    async with node(pg, runs, clock) as one:
        await one.store.add_schedule(schedule)
        await start_worker(one.jobs)
        assert [q.slot for q in (await one.runner.tick()).queued] == [NOW]
        async with asyncio.timeout(WITHIN):
            await runs.running.wait()
        assert await one.store.set_schedule_status(schedule.id, "cancelled", by=schedule.owner)
        # The next slot's job, queued by a process that looked just before the cancel reached it.
        slots = jobs_runtime.slot_jobs(one.jobs, PLATFORM)
        assert slots is not None
        assert await slots.defer(schedule.id, NOW + 300)
        runs.hold.set()
        await answered(pg, {(schedule.id, NOW)})
        for later in (NOW + 300, NOW + 600, NOW + 900):
            clock.now = later
            assert (await one.runner.tick()).queued == []
            assert await one.runner.hand_on() == []
        await no_jobs_left(pg)

    assert runs.started == [(schedule.id, NOW, 0.0)]
    assert await run_rows(pg) == {(schedule.id, NOW): "answered"}


async def test_a_persons_message_queued_after_a_due_slot_is_taken_first(pg: PostgresBackend) -> None:
    """A burst of scheduled runs never makes a person's message wait behind all of it: a free worker
    takes the message's job (priority 0) before any slot's (below it)."""
    order: list[str] = []
    daily = a_schedule("FREQ=DAILY", NOW)
    clock, runs = Clock(NOW + 1), Runs()

    async def start(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        order.append("slot")
        return await runs(schedule, slot, late_by)

    async def message(*, event_id: str) -> None:
        order.append("message")

    store = await pg.open()
    jobs = await open_turn_jobs(pg.location, stall_timeout=STALL, poll_interval=0.2)
    try:
        runner = ScheduleRunner(
            store, start, locks=store.turn_lock, clock=clock, jobs=jobs_runtime.slot_jobs(jobs, PLATFORM)
        )
        for name, handler in jobs_runtime.schedule_handlers(PLATFORM, runner.run_slot).items():
            jobs.register(name, handler)
        event_job = jobs_runtime.job_name(PLATFORM, jobs_runtime.EVENT)
        jobs.register(event_job, message)
        await store.add_schedule(daily)
        assert [q.schedule.id for q in (await runner.tick()).queued] == [daily.id]
        assert await jobs.enqueue(event_job, {"event_id": "Ev1"}, event="test:Ev1", conversation="c1")
        await start_worker(jobs, concurrency=1)  # one free place: whichever it takes first goes first
        await until("both jobs", lambda: _ran(order, 2))
    finally:
        await jobs.aclose()
        await store.close()
    assert order == ["message", "slot"]


async def _ran(order: list[str], count: int) -> bool:
    return len(order) >= count

"""The schedule runner on SQLite and PostgreSQL, with a fake clock: every slot of a simulated day run
exactly once; downtime gives one late run within the grace and missed slots, never a burst; two
runners on two store connections ticking at the same moments run each slot once; a schedule
cancelled during its run gets no later runs; runs a stopped process left "running" are recorded as
failed, never run again, while a live process's run is left to it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from bot.errors import StoreError
from bot.observe import metrics
from bot.schedules import timing
from bot.schedules.runner import MISSED_KEPT, ScheduleRunner
from bot.schedules.runs import MAX_HAND_ONS, STOPPED, STOPPED_TOO_OFTEN
from bot.schedules.slots import RunOutcome, Tick
from bot.store.base import ConversationStore
from bot.store.schedules import new_schedule_id
from bot.types import ConversationKey, Schedule
from tests.fakes.clock import Clock
from tests.stores import Backend
from tests.together import released_together

pytestmark = pytest.mark.both_stores

REPO = Path(__file__).resolve().parent.parent

NOW = 1_796_630_400.0  # Mon 7 Dec 2026 09:00 UTC
MINUTE = 60.0
HOUR = 3600.0
DAY = 86_400.0
KEY = ConversationKey(platform="terminal", workspace="alice", channel="cli", thread="default")


def a_schedule(rule: str, first_at: float, **more: object) -> Schedule:
    fields: dict[str, object] = {
        "id": new_schedule_id(),
        "owner": "terminal:alice:alice",
        "owner_user": "alice",
        "key": KEY,
        "place": "",
        "prompt": "check the air in A1001",
        "first_at": first_at,
        "rule": rule,
        "timezone": "Europe/Paris",
        "status": "active",
        "created_at": NOW - DAY,
    } | more
    return Schedule(**fields)  # type: ignore[arg-type]


class Runs:
    """The front end's `start`: records each run it is given; `hold` keeps runs going until set."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float, float]] = []
        self.hold: asyncio.Event | None = None
        self.running = asyncio.Event()

    async def __call__(self, schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        self.started.append((schedule.id, slot, late_by))
        self.running.set()
        if self.hold is not None:
            await self.hold.wait()
        return RunOutcome("answered")


def runner_for(store: ConversationStore, runs: Runs, clock: Clock, **more: object) -> ScheduleRunner:
    return ScheduleRunner(store, runs, locks=store.turn_lock, clock=clock, **more)  # type: ignore[arg-type]


async def tick(runner: ScheduleRunner) -> None:
    await runner.tick()
    await runner.wait_for_runs()


async def test_each_slot_of_a_simulated_day_runs_exactly_once(store: ConversationStore) -> None:
    once = a_schedule("", NOW + 3 * HOUR + 7)
    every_five = a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW)
    daily = a_schedule("FREQ=DAILY", NOW + 9 * HOUR)
    for schedule in (once, every_five, daily):
        await store.add_schedule(schedule)
    clock, runs = Clock(NOW - MINUTE), Runs()
    runner = runner_for(store, runs, clock)
    figures = metrics.reset()

    while clock.now <= NOW + DAY:
        await tick(runner)
        clock.now += 100.0

    counted = Counter((sid, slot) for sid, slot, _ in runs.started)
    assert max(counted.values()) == 1  # never twice
    for schedule in (once, every_five, daily):
        expected = timing.slots_between(
            schedule.first_at, schedule.rule, schedule.timezone, NOW - HOUR, clock.now - 100.0
        )
        ran = sorted(slot for sid, slot, _ in runs.started if sid == schedule.id)
        assert ran == expected, schedule.rule
        assert {r.status for r in await store.runs_of(schedule.id, 400)} == {"answered"}
    assert (
        len([1 for sid, _, _ in runs.started if sid == every_five.id]) == 288
    )  # one a day short of its last look
    assert all(late_by < 100.0 for _, _, late_by in runs.started)  # each at the first look after it
    assert (await store.schedule(once.id)).status == "done"  # type: ignore[union-attr]
    answered = figures.registry.get_sample_value("nerve_schedule_runs_total", {"outcome": "answered"})
    assert answered == len(runs.started)
    assert figures.registry.get_sample_value("nerve_schedules_active") == 2  # the once one is done


async def test_downtime_gives_one_late_run_within_the_grace_and_misses_older_slots(
    store: ConversationStore,
) -> None:
    daily = a_schedule("FREQ=DAILY", NOW)
    every_five = a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW)
    for schedule in (daily, every_five):
        await store.add_schedule(schedule)
    clock, runs = Clock(NOW), Runs()
    figures = metrics.reset()
    await tick(runner_for(store, runs, clock))
    assert sorted(runs.started) == sorted([(daily.id, NOW, 0.0), (every_five.id, NOW, 0.0)])

    # Stopped for a day: back 17 minutes after the next 09:00, a new process looks.
    runs.started.clear()
    clock.now = NOW + DAY + 17 * MINUTE
    runner = runner_for(store, runs, clock)
    found = await runner.tick()
    await runner.wait_for_runs()
    assert sorted(runs.started) == sorted(
        [(daily.id, NOW + DAY, 17 * MINUTE), (every_five.id, NOW + DAY + 15 * MINUTE, 2 * MINUTE)]
    )  # one run each: never a burst
    assert {(s.schedule.id, s.late_by) for s in found.started} == {
        (daily.id, 17 * MINUTE),
        (every_five.id, 2 * MINUTE),
    }
    missed = [r for r in await store.runs_of(every_five.id, 400) if r.status == "missed"]
    # 290 passed (the 288 of the day and two of its 09:00s); only the newest are recorded, and the
    # older ones are never offered again (the looks start after the newest recorded).
    newest = [NOW + DAY + 10 * MINUTE - 5 * MINUTE * i for i in range(MISSED_KEPT)]
    assert sorted(r.slot for r in missed) == sorted(newest) and len(found.missed) == MISSED_KEPT
    late = (await store.runs_of(daily.id, 1))[0]
    assert (late.slot, late.status, late.late_by) == (NOW + DAY, "answered", 17 * MINUTE)
    lateness = "nerve_schedule_run_lateness_seconds"
    assert figures.registry.get_sample_value(f"{lateness}_count") == 4
    assert figures.registry.get_sample_value(f"{lateness}_sum") == 19 * MINUTE
    missed_total = figures.registry.get_sample_value("nerve_schedule_runs_total", {"outcome": "missed"})
    assert missed_total == MISSED_KEPT

    # Stopped past the grace: the daily slots are recorded missed, none runs.
    runs.started.clear()
    clock.now = NOW + 4 * DAY + 2 * HOUR
    await tick(runner_for(store, runs, clock))
    assert [sid for sid, _, _ in runs.started] == [every_five.id]
    recent = await store.runs_of(daily.id, 3)
    assert [(r.slot, r.status) for r in recent] == [
        (NOW + 4 * DAY, "missed"),
        (NOW + 3 * DAY, "missed"),
        (NOW + 2 * DAY, "missed"),
    ]
    # And looking again at the same moment changes nothing.
    runs.started.clear()
    await tick(runner_for(store, runs, clock))
    assert runs.started == []


async def test_a_paused_schedule_skips_the_slots_of_its_pause_and_runs_again_once_resumed(
    store: ConversationStore,
) -> None:
    daily = a_schedule("FREQ=DAILY", NOW)
    await store.add_schedule(daily)
    clock, runs = Clock(NOW + MINUTE), Runs()
    await tick(runner_for(store, runs, clock))
    await store.set_schedule_status(daily.id, "paused", by="terminal:alice:alice", at=NOW + HOUR)
    clock.now = NOW + DAY + MINUTE
    await tick(runner_for(store, runs, clock))
    await store.set_schedule_status(daily.id, "active", by="terminal:alice:alice", at=NOW + DAY + 5 * MINUTE)
    clock.now = NOW + DAY + 10 * MINUTE  # within the grace of the paused-over slot: still not run
    await tick(runner_for(store, runs, clock))
    clock.now = NOW + 2 * DAY
    await tick(runner_for(store, runs, clock))
    assert [slot for _, slot, _ in runs.started] == [NOW, NOW + 2 * DAY]
    assert [r.status for r in await store.runs_of(daily.id)] == ["answered", "answered"]  # none missed


async def test_a_once_schedule_paused_past_its_time_and_resumed_is_missed_and_done_not_left_active(
    store: ConversationStore,
) -> None:
    once = a_schedule("", NOW + 10 * MINUTE)
    await store.add_schedule(once)
    clock, runs = Clock(NOW), Runs()
    await store.set_schedule_status(once.id, "paused", by="terminal:alice:alice", at=NOW + MINUTE)
    await store.set_schedule_status(once.id, "active", by="terminal:alice:alice", at=NOW + 20 * MINUTE)
    clock.now = NOW + 25 * MINUTE
    await tick(runner_for(store, runs, clock))
    assert runs.started == []
    assert [r.status for r in await store.runs_of(once.id)] == ["missed"]
    assert (await store.schedule(once.id)).status == "done"  # type: ignore[union-attr]


async def test_a_repeating_schedule_confirmed_late_runs_its_due_slot_and_misses_none_from_before_it(
    store: ConversationStore,
) -> None:
    """Asked for 09:00 every 5 minutes, confirmed at 09:50: the 09:50 slot runs late-free at once;
    the ten before it fell before the schedule existed and are not recorded as missed."""
    late = a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW, created_at=NOW + 50 * MINUTE)
    await store.add_schedule(late)
    clock, runs = Clock(NOW + 50 * MINUTE), Runs()
    runner = runner_for(store, runs, clock)
    found = await runner.tick()
    await runner.wait_for_runs()
    assert found.missed == [] and [slot for _, slot, _ in runs.started] == [NOW + 50 * MINUTE]
    assert [r.status for r in await store.runs_of(late.id)] == ["answered"]


async def test_two_runners_on_two_connections_run_each_slot_once(store_backend: Backend) -> None:
    async with await store_backend.open() as first, await store_backend.open() as second:
        schedules = [a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW + i * 7) for i in range(4)]
        for schedule in schedules:
            await first.add_schedule(schedule)
        clock, runs = Clock(NOW), Runs()
        runners = [runner_for(first, runs, clock), runner_for(second, runs, clock)]
        while clock.now <= NOW + 2 * HOUR:
            await asyncio.gather(*(r.tick() for r in runners))
            await asyncio.gather(*(r.wait_for_runs() for r in runners))
            clock.now += 150.0
        counted = Counter((sid, slot) for sid, slot, _ in runs.started)
        expected = {
            (s.id, slot)
            for s in schedules
            for slot in timing.slots_between(s.first_at, s.rule, "UTC", 0, NOW + 2 * HOUR)
        }
        assert set(counted) == expected and set(counted.values()) == {1}
        assert len(expected) == 4 * 24 + 1


async def test_a_schedule_whose_rule_ran_out_ends_once_its_last_run_has(store_backend: Backend) -> None:
    """Another process's look after the last slot leaves the schedule active while that slot's run is
    under way (ended, a run handed on after its process stopped would be recorded failed)."""
    async with await store_backend.open() as first, await store_backend.open() as second:
        twice = a_schedule("FREQ=DAILY;COUNT=2", NOW)
        await first.add_schedule(twice)
        clock, runs = Clock(NOW + DAY), Runs()
        await first.record_missed(twice.id, NOW, at=NOW + DAY)
        runs.hold = asyncio.Event()
        running = runner_for(first, runs, clock)
        await running.tick()
        await runs.running.wait()
        clock.now += HOUR
        elsewhere = runner_for(second, Runs(), clock)
        await elsewhere.tick()
        assert (await second.schedule(twice.id)).status == "active"  # type: ignore[union-attr]
        runs.hold.set()
        await running.wait_for_runs()
        await elsewhere.tick()
        assert (await second.schedule(twice.id)).status == "done"  # type: ignore[union-attr]
        assert [slot for _, slot, _ in runs.started] == [NOW + DAY]


async def test_a_schedule_cancelled_during_its_run_gets_no_later_runs(store: ConversationStore) -> None:
    every_five = a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW)
    await store.add_schedule(every_five)
    clock, runs = Clock(NOW), Runs()
    runs.hold = asyncio.Event()
    runner = runner_for(store, runs, clock)
    await runner.tick()
    await runs.running.wait()
    assert await store.set_schedule_status(every_five.id, "cancelled", by="terminal:alice:alice", at=NOW + 1)
    runs.hold.set()  # the run in flight finishes
    await runner.wait_for_runs()
    for minutes in (5, 10, 60):
        clock.now = NOW + minutes * MINUTE
        await tick(runner)
    assert [slot for _, slot, _ in runs.started] == [NOW]
    assert [(r.slot, r.status) for r in await store.runs_of(every_five.id)] == [(NOW, "answered")]
    # A claim for a later slot is refused by the store itself, whoever asks.
    assert not await store.claim_slot(every_five.id, NOW + 5 * MINUTE, at=NOW + 5 * MINUTE, late_by=0)


async def test_a_run_its_process_left_running_is_handed_on_once(store: ConversationStore) -> None:
    daily = a_schedule("FREQ=DAILY", NOW)
    await store.add_schedule(daily)
    # A process claimed the slot and stopped before finishing it (its run lock went with it).
    assert await store.claim_slot(daily.id, NOW, at=NOW + 1, late_by=1.0)
    clock, runs = Clock(NOW + 5 * MINUTE), Runs()
    runner = runner_for(store, runs, clock)

    taken = await runner.hand_on()
    await runner.wait_for_runs()
    await tick(runner)
    again = await runner.hand_on()

    assert [(t.schedule.id, t.slot, t.late_by) for t in taken] == [(daily.id, NOW, 1.0)]
    assert again == []
    assert [(sid, slot) for sid, slot, _ in runs.started] == [(daily.id, NOW)]  # once, not twice
    assert [(r.slot, r.status) for r in await store.runs_of(daily.id)] == [(NOW, "answered")]


async def test_a_run_left_beyond_the_grace_or_cancelled_is_recorded_failed_not_handed_on(
    store: ConversationStore,
) -> None:
    old = a_schedule("FREQ=DAILY", NOW)
    cancelled = a_schedule("FREQ=DAILY", NOW + 90 * MINUTE)
    await store.add_schedule(old)
    await store.add_schedule(cancelled)
    assert await store.claim_slot(old.id, NOW, at=NOW, late_by=0.0)
    assert await store.claim_slot(cancelled.id, NOW + 90 * MINUTE, at=NOW + 90 * MINUTE, late_by=0.0)
    assert await store.set_schedule_status(cancelled.id, "cancelled", by="someone")
    # Two hours on: the first run's slot is beyond the grace; the second's is not, but it was cancelled.
    clock, runs = Clock(NOW + 2 * 3600), Runs()

    assert await runner_for(store, runs, clock, grace=3600.0).hand_on() == []

    assert runs.started == []
    for schedule in (old, cancelled):
        run = (await store.runs_of(schedule.id))[0]
        assert (run.status, run.note) == ("failed", STOPPED)
    assert (await store.schedule(old.id)).last_outcome == "failed"  # type: ignore[union-attr]


async def test_a_run_of_a_live_process_is_left_to_it(store_backend: Backend) -> None:
    async with await store_backend.open() as first, await store_backend.open() as second:
        daily = a_schedule("FREQ=DAILY", NOW)
        await first.add_schedule(daily)
        clock, runs = Clock(NOW), Runs()
        runs.hold = asyncio.Event()
        live = runner_for(first, runs, clock)
        await live.tick()
        await runs.running.wait()

        clock.now = NOW + MINUTE
        settling = asyncio.create_task(runner_for(second, Runs(), clock).hand_on())
        await asyncio.sleep(0.3)  # it waits for the live run's lock, whatever its pace
        assert not settling.done()
        runs.hold.set()
        assert await settling == []
        await live.wait_for_runs()
        assert [(r.status, r.note) for r in await first.runs_of(daily.id)] == [("answered", None)]


async def test_a_run_cut_off_by_a_stop_is_handed_on_by_the_next_runner(store: ConversationStore) -> None:
    daily = a_schedule("FREQ=DAILY", NOW)
    await store.add_schedule(daily)
    clock, runs = Clock(NOW), Runs()
    runs.hold = asyncio.Event()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await asyncio.Event().wait()  # only `wake` or a cancel ends it

    runner = runner_for(store, runs, clock, sleep=sleep)
    forever = asyncio.create_task(runner.run_forever())
    await runs.running.wait()
    forever.cancel()
    with pytest.raises(asyncio.CancelledError):
        await forever
    assert [r.status for r in await store.runs_of(daily.id)] == ["running"]
    assert sleeps == [15.0]

    clock.now = NOW + MINUTE
    later, handed = Runs(), asyncio.Event()

    async def on_tick(found: Tick) -> None:
        if found.handed_on:
            handed.set()

    next_runner = runner_for(store, later, clock, sleep=sleep)
    again = asyncio.create_task(next_runner.run_forever(on_tick))
    await handed.wait()
    await next_runner.wait_for_runs()
    again.cancel()
    await asyncio.gather(again, return_exceptions=True)
    assert [(sid, slot) for sid, slot, _ in later.started] == [(daily.id, NOW)]
    assert [(r.status, r.late_by) for r in await store.runs_of(daily.id)] == [("answered", 0.0)]


async def test_a_new_schedule_wakes_the_runner_before_its_cadence(store: ConversationStore) -> None:
    clock, runs = Clock(NOW), Runs()
    looked = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await asyncio.Event().wait()

    async def on_tick(found: object) -> None:
        looked.set()

    runner = runner_for(store, runs, clock, sleep=sleep)
    forever = asyncio.create_task(runner.run_forever(on_tick))
    await looked.wait()
    looked.clear()
    soon = a_schedule("", NOW)
    await store.add_schedule(soon)
    runner.wake.set()
    await runs.running.wait()
    assert [sid for sid, _, _ in runs.started] == [soon.id]
    forever.cancel()
    with pytest.raises(asyncio.CancelledError):
        await forever


async def test_three_processes_running_the_same_schedules_run_each_slot_once(
    store: ConversationStore, store_backend: Backend
) -> None:
    """Three runner processes on one database look at the same fake moments (each at its own
    pace): every slot of a few schedules is run by exactly one of them."""
    schedules = [a_schedule("FREQ=MINUTELY;INTERVAL=5", NOW + i * 11) for i in range(3)]
    schedules.append(a_schedule("FREQ=HOURLY", NOW))
    for schedule in schedules:
        await store.add_schedule(schedule)
    last = NOW + 3 * HOUR
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(REPO / "tests" / "schedule_runner_proc.py"),
            store_backend.location,
            str(NOW),
            str(last),
            "100",
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(3)
    ]
    ran = [(sid, float(slot)) for sid, slot in await released_together(processes)]
    until = NOW + 108 * 100.0  # the last look
    expected = {
        (s.id, slot) for s in schedules for slot in timing.slots_between(s.first_at, s.rule, "UTC", 0, until)
    }
    assert len(ran) == len(expected) and set(ran) == expected
    statuses = await store_backend.rows("SELECT status FROM schedule_runs")
    assert len(statuses) == len(expected) and {row[0] for row in statuses} == {"answered"}


async def test_a_burst_of_due_slots_runs_a_few_at_a_time_and_the_rest_at_the_next_looks(
    store: ConversationStore,
) -> None:
    schedules = [a_schedule("FREQ=DAILY", NOW) for _ in range(5)]
    for schedule in schedules:
        await store.add_schedule(schedule)
    clock, runs = Clock(NOW), Runs()
    runs.hold = asyncio.Event()
    runner = runner_for(store, runs, clock, max_running=2)
    found = await runner.tick()
    assert len(found.started) == 2 and runner.running == 2
    clock.now += 15.0
    assert (await runner.tick()).started == []  # both still under way: nothing more starts
    runs.hold.set()
    await runner.wait_for_runs()
    for _ in range(2):
        clock.now += 15.0
        await tick(runner)
    assert sorted(sid for sid, _, _ in runs.started) == sorted(s.id for s in schedules)
    # The rest at the next looks: two at once, a third as soon as a place is free (in that look, or
    # the one after, as the runs end while the look goes on).
    lateness = sorted(late for _, _, late in runs.started)
    assert lateness[:4] == [0.0, 0.0, 30.0, 30.0] and lateness[4] in (30.0, 45.0), lateness


async def test_a_burst_waiting_for_free_places_is_looked_at_again_as_runs_end_not_at_the_cadence(
    store: ConversationStore,
) -> None:
    schedules = [a_schedule("FREQ=DAILY", NOW) for _ in range(5)]
    for schedule in schedules:
        await store.add_schedule(schedule)
    clock, runs = Clock(NOW), Runs()
    runs.hold = asyncio.Event()
    looks: list[int] = []

    async def sleep(seconds: float) -> None:
        await asyncio.Event().wait()  # the cadence never passes: only `wake` brings another look

    async def on_tick(found: Tick) -> None:
        looks.append(len(found.started))
        if sum(looks) == len(schedules):
            everyone.set()

    everyone = asyncio.Event()
    runner = runner_for(store, runs, clock, sleep=sleep, max_running=2)
    forever = asyncio.create_task(runner.run_forever(on_tick))
    await runs.running.wait()
    assert runner.running <= 2  # (the look may still be launching its second)
    runs.hold.set()  # the runs end: each end may bring the next look
    await asyncio.wait_for(everyone.wait(), 30)  # liveness only: the test fails here without the wake
    await runner.wait_for_runs()
    forever.cancel()
    await asyncio.gather(forever, return_exceptions=True)
    assert sorted(sid for sid, _, _ in runs.started) == sorted(s.id for s in schedules)
    assert [late for _, _, late in runs.started] == [0.0] * 5  # all on time: no cadence passed


async def test_the_runner_looks_again_at_the_next_slots_time_when_it_comes_before_the_cadence(
    store: ConversationStore,
) -> None:
    soon = a_schedule("FREQ=DAILY", NOW + 4.0)
    await store.add_schedule(soon)
    clock, runs = Clock(NOW), Runs()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds
        if len(sleeps) == 2:
            await asyncio.Event().wait()

    runner = runner_for(store, runs, clock, sleep=sleep)
    forever = asyncio.create_task(runner.run_forever())
    await runs.running.wait()
    await runner.wait_for_runs()
    forever.cancel()
    await asyncio.gather(forever, return_exceptions=True)
    assert sleeps[0] == pytest.approx(4.05)  # not the 15 s cadence
    assert [(sid, late) for sid, _, late in runs.started] == [(soon.id, pytest.approx(0.05))]


async def test_a_schedule_the_runner_cannot_work_out_costs_only_its_own_runs(
    store: ConversationStore,
) -> None:
    # A zone this machine's zone data does not know (replicas on different tzdata, mid-upgrade).
    unknown = a_schedule("FREQ=DAILY", NOW, timezone="America/Nowhere_Zone")
    after = a_schedule("FREQ=DAILY", NOW)
    await store.add_schedule(unknown)
    await store.add_schedule(after)
    clock, runs = Clock(NOW), Runs()
    runner = runner_for(store, runs, clock)

    await tick(runner)

    assert [sid for sid, _, _ in runs.started] == [after.id]


async def test_a_run_every_process_stops_during_is_recorded_failed_after_a_few_hand_ons(
    store: ConversationStore,
) -> None:
    daily = a_schedule("FREQ=DAILY", NOW)
    await store.add_schedule(daily)
    assert await store.claim_slot(daily.id, NOW, at=NOW, late_by=0.0)
    clock = Clock(NOW + MINUTE)
    taken = 0
    for _ in range(MAX_HAND_ONS):
        runs = Runs()
        runs.hold = asyncio.Event()
        runner = runner_for(store, runs, clock)
        handing = asyncio.create_task(runner.hand_on())
        await runs.running.wait()
        taken += 1
        await runner.stop()  # the process stops during the run again
        await asyncio.gather(handing, return_exceptions=True)
    assert taken == MAX_HAND_ONS
    assert [r.hand_ons for r in await store.runs_of(daily.id)] == [MAX_HAND_ONS]

    last = Runs()
    assert await runner_for(store, last, clock).hand_on() == []

    assert last.started == []
    run = (await store.runs_of(daily.id))[0]
    assert (run.status, run.note) == ("failed", STOPPED_TOO_OFTEN)


async def test_a_store_outage_costs_the_runner_its_looks_but_no_error_line_or_traceback(
    store: ConversationStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's own outage line says it is away, once, at WARNING; the runner only tries again."""
    looks = 0

    async def away(*_args: object, **_kwargs: object) -> list[Schedule]:
        nonlocal looks
        looks += 1
        raise StoreError("cannot reach the conversation store")

    monkeypatch.setattr(store, "active_schedules", away)
    monkeypatch.setattr(store, "running_runs", away)
    tried = asyncio.Event()

    async def sleep(seconds: float) -> None:
        if looks >= 2:
            tried.set()
        await asyncio.sleep(0)

    runner = runner_for(store, Runs(), Clock(NOW), sleep=sleep)
    forever = asyncio.create_task(runner.run_forever())
    await asyncio.wait_for(tried.wait(), 30)
    forever.cancel()
    await asyncio.gather(forever, return_exceptions=True)
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.WARNING or r.exc_info] == []

"""The schedule ledger on SQLite and on PostgreSQL: what the lists show, which status changes are
allowed, and the exactly-once claim of each slot (many concurrent claims, and claims from separately
opened stores on one database, as several processes make them), missed slots, and a person's
schedules forgotten and exported with the rest of their data.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from pathlib import Path

import pytest

from bot.store.base import ConversationStore
from bot.store.schedules import new_schedule_id
from bot.types import ConversationKey, Person, Schedule
from tests.stores import Backend
from tests.together import released_together

pytestmark = pytest.mark.both_stores

REPO = Path(__file__).resolve().parent.parent

NOW = 1_796_630_400.0  # Mon 7 Dec 2026 09:00 UTC
DAY = 86_400.0
ALICE = Person(id="slack:T1:UALICE", platform="slack", user_id="UALICE", workspace="T1")
BOB = Person(id="slack:T1:UBOB", platform="slack", user_id="UBOB", workspace="T1")
DM = ConversationKey(platform="slack", workspace="T1", channel="DALICE", thread="")
GENERAL = ConversationKey(platform="slack", workspace="T1", channel="CGEN", thread="")


def a_schedule(
    who: Person = ALICE, *, rule: str = "FREQ=DAILY", prompt: str = "check the air in A1001", **more: object
) -> Schedule:
    fields: dict[str, object] = {
        "id": new_schedule_id(),
        "owner": who.id,
        "owner_user": who.user_id,
        "key": DM,
        "place": "your DM",
        "prompt": prompt,
        "first_at": NOW,
        "rule": rule,
        "timezone": "Europe/Paris",
        "status": "active",
        "created_at": NOW - DAY,
    } | more
    return Schedule(**fields)  # type: ignore[arg-type]


async def test_a_schedule_is_stored_as_given_and_listed_by_its_owner(store: ConversationStore) -> None:
    mine = a_schedule(first_at=NOW + 0.25, key=GENERAL, place="#general")
    other = a_schedule(prompt="water the plants", created_at=NOW - 2 * DAY)
    bobs = a_schedule(BOB)
    for schedule in (mine, other, bobs):
        await store.add_schedule(schedule)

    assert await store.schedule(mine.id) == mine  # every field, the key and a fractional instant too
    assert await store.schedule("s00000000") is None
    assert [s.id for s in await store.schedules_of(ALICE.id)] == [other.id, mine.id]  # oldest first
    assert [s.id for s in await store.schedules_of(BOB.id)] == [bobs.id]
    assert {s.id for s in await store.all_schedules()} == {mine.id, other.id, bobs.id}
    assert await store.count_active_schedules(ALICE.id) == 2
    assert mine.id.startswith("s") and len(mine.id) == 9


async def test_pause_resume_and_cancel_and_cancelled_is_final(store: ConversationStore) -> None:
    first, second = a_schedule(), a_schedule()
    await store.add_schedule(first)
    await store.add_schedule(second)

    assert await store.set_schedule_status(first.id, "paused", by=ALICE.id, at=NOW)
    assert [s.id for s in await store.active_schedules()] == [second.id]
    assert await store.count_active_schedules(ALICE.id) == 2  # a paused schedule keeps its place
    assert {s.id for s in await store.schedules_of(ALICE.id)} == {first.id, second.id}
    assert await store.set_schedule_status(first.id, "active", by=ALICE.id, at=NOW)
    assert {s.id for s in await store.active_schedules()} == {first.id, second.id}

    assert await store.set_schedule_status(first.id, "cancelled", by=ALICE.id, at=NOW)
    assert not await store.set_schedule_status(first.id, "active", by=ALICE.id, at=NOW)
    assert not await store.set_schedule_status(first.id, "paused", by=ALICE.id, at=NOW)
    assert not await store.set_schedule_status("s00000000", "cancelled", by=ALICE.id, at=NOW)
    found = await store.schedule(first.id)
    assert found is not None and found.status == "cancelled" and found.ended
    assert (found.changed_by, found.changed_at) == (ALICE.id, NOW)
    assert [s.id for s in await store.schedules_of(ALICE.id)] == [second.id]
    assert {s.id for s in await store.schedules_of(ALICE.id, include_ended=True)} == {first.id, second.id}
    assert [s.id for s in await store.all_schedules()] == [second.id]
    assert len(await store.all_schedules(include_ended=True)) == 2
    assert await store.count_active_schedules(ALICE.id) == 1


async def test_twenty_concurrent_claims_of_one_slot_let_exactly_one_run(store: ConversationStore) -> None:
    schedule = a_schedule()
    await store.add_schedule(schedule)

    claims = await asyncio.gather(
        *(store.claim_slot(schedule.id, NOW, at=NOW + i, late_by=float(i)) for i in range(20))
    )

    assert claims.count(True) == 1
    [run] = await store.runs_of(schedule.id)
    winner = claims.index(True)
    assert (run.slot, run.status, run.started_at, run.late_by) == (NOW, "running", NOW + winner, winner)
    assert run.finished_at is None
    assert await store.latest_slot(schedule.id) == NOW


async def test_stores_opened_separately_on_one_database_claim_each_slot_once(
    store: ConversationStore, store_backend: Backend
) -> None:
    """Three stores, as three processes would open them, each claiming every one of ten slots of
    ten schedules twice at once: every slot is claimed by one caller, never by two."""
    schedules = [a_schedule() for _ in range(10)]
    for schedule in schedules:
        await store.add_schedule(schedule)
    slots = [NOW + i * DAY for i in range(10)]
    async with await store_backend.open() as second, await store_backend.open() as third:
        stores = (store, second, third)
        attempts = [
            (s.id, slot, opened)
            for s, slot, opened, _ in itertools.product(schedules, slots, stores, range(2))
        ]
        claims = await asyncio.gather(
            *(opened.claim_slot(sid, slot, at=slot, late_by=0.0) for sid, slot, opened in attempts)
        )
    won: dict[tuple[str, float], int] = {}
    for (sid, slot, _), claimed in zip(attempts, claims, strict=True):
        won[(sid, slot)] = won.get((sid, slot), 0) + int(claimed)
    assert set(won.values()) == {1}, [key for key, count in won.items() if count != 1]
    rows = await store_backend.rows("SELECT schedule_id, slot FROM schedule_runs")
    assert len(rows) == len(set(rows)) == 100


async def test_a_slot_of_a_paused_cancelled_or_unknown_schedule_cannot_be_claimed(
    store: ConversationStore,
) -> None:
    schedule = a_schedule()
    await store.add_schedule(schedule)

    await store.set_schedule_status(schedule.id, "paused", by=ALICE.id, at=NOW)
    assert not await store.claim_slot(schedule.id, NOW, at=NOW, late_by=0)
    await store.set_schedule_status(schedule.id, "active", by=ALICE.id, at=NOW)
    assert await store.claim_slot(schedule.id, NOW, at=NOW, late_by=0)

    await store.set_schedule_status(schedule.id, "cancelled", by=ALICE.id, at=NOW)
    assert not await store.claim_slot(schedule.id, NOW + DAY, at=NOW + DAY, late_by=0)
    assert not await store.claim_slot("s00000000", NOW, at=NOW, late_by=0)
    assert [run.slot for run in await store.runs_of(schedule.id)] == [NOW]


async def test_a_slot_recorded_missed_is_never_run_later(store: ConversationStore) -> None:
    schedule = a_schedule()
    await store.add_schedule(schedule)

    assert await store.record_missed(schedule.id, NOW, at=NOW + 7200)
    assert not await store.record_missed(schedule.id, NOW, at=NOW + 7300)
    assert not await store.claim_slot(schedule.id, NOW, at=NOW + 7400, late_by=7400)
    [run] = await store.runs_of(schedule.id)
    assert (run.status, run.started_at, run.finished_at, run.late_by) == (
        "missed",
        NOW + 7200,
        NOW + 7200,
        7200,
    )
    found = await store.schedule(schedule.id)
    assert found is not None and (found.last_slot, found.last_outcome) == (NOW, "missed")
    assert found.status == "active"  # a recurring schedule goes on
    # And a slot being run is not recorded missed by a late-starting peer.
    assert await store.claim_slot(schedule.id, NOW + DAY, at=NOW + DAY, late_by=0)
    assert not await store.record_missed(schedule.id, NOW + DAY, at=NOW + DAY + 7200)


async def test_a_finished_run_is_its_schedules_last_outcome(store: ConversationStore) -> None:
    schedule = a_schedule()
    await store.add_schedule(schedule)
    assert await store.claim_slot(schedule.id, NOW, at=NOW + 60, late_by=60)

    assert await store.finish_run(
        schedule.id, NOW, "answered", at=NOW + 90, note="due at 09:00, run at 09:01"
    )
    assert not await store.finish_run(schedule.id, NOW, "failed", at=NOW + 95)  # finished already
    assert not await store.finish_run(schedule.id, NOW + DAY, "answered", at=NOW + 95)  # never claimed

    [run] = await store.runs_of(schedule.id)
    assert (run.status, run.finished_at, run.note) == ("answered", NOW + 90, "due at 09:00, run at 09:01")
    found = await store.schedule(schedule.id)
    assert found is not None
    assert (found.last_slot, found.last_outcome, found.status) == (NOW, "answered", "active")
    # An older slot settled late does not replace the newer outcome.
    assert await store.claim_slot(schedule.id, NOW + DAY, at=NOW + DAY, late_by=0)
    assert await store.record_missed(schedule.id, NOW - DAY, at=NOW + DAY)
    assert await store.finish_run(schedule.id, NOW + DAY, "failed", at=NOW + DAY + 5)
    found = await store.schedule(schedule.id)
    assert found is not None and (found.last_slot, found.last_outcome) == (NOW + DAY, "failed")
    assert [r.slot for r in await store.runs_of(schedule.id)] == [NOW + DAY, NOW, NOW - DAY]
    assert [r.slot for r in await store.runs_of(schedule.id, limit=1)] == [NOW + DAY]
    assert await store.latest_slot(schedule.id) == NOW + DAY


async def test_a_once_schedule_is_done_when_its_slot_ran_or_was_missed(store: ConversationStore) -> None:
    ran, missed, cancelled = a_schedule(rule=""), a_schedule(rule=""), a_schedule(rule="")
    for schedule in (ran, missed, cancelled):
        await store.add_schedule(schedule)

    assert await store.claim_slot(ran.id, NOW, at=NOW, late_by=0)
    still = await store.schedule(ran.id)
    assert still is not None and still.status == "active"  # running: not done yet
    await store.finish_run(ran.id, NOW, "answered", at=NOW + 30)
    await store.record_missed(missed.id, NOW, at=NOW + 7200)
    # Cancelled while its run was in flight: it stays cancelled, and the run still finishes.
    assert await store.claim_slot(cancelled.id, NOW, at=NOW, late_by=0)
    assert await store.set_schedule_status(cancelled.id, "cancelled", by=ALICE.id, at=NOW + 1)
    assert await store.finish_run(cancelled.id, NOW, "answered", at=NOW + 30)

    statuses = {s.id: s.status for s in await store.schedules_of(ALICE.id, include_ended=True)}
    assert statuses == {ran.id: "done", missed.id: "done", cancelled.id: "cancelled"}
    done = await store.schedule(ran.id)
    assert done is not None and (done.changed_by, done.changed_at) == ("nerve", NOW + 30)
    assert await store.active_schedules() == []
    assert await store.count_active_schedules(ALICE.id) == 0
    assert not await store.set_schedule_status(ran.id, "active", by=ALICE.id, at=NOW + 60)


async def test_runs_left_running_are_found_for_hand_over(store: ConversationStore) -> None:
    schedule = a_schedule()
    await store.add_schedule(schedule)
    for i in range(3):
        assert await store.claim_slot(schedule.id, NOW + i * DAY, at=NOW + i * DAY, late_by=0)
    await store.finish_run(schedule.id, NOW, "answered", at=NOW + 10)

    stale = await store.running_runs(older_than=NOW + 2 * DAY)
    assert [(r.slot, r.status) for r in stale] == [(NOW + DAY, "running")]
    assert len(await store.running_runs(older_than=NOW + 3 * DAY)) == 2


async def test_forgetting_a_person_deletes_their_schedules_and_runs_and_nobody_elses(
    store: ConversationStore, store_backend: Backend
) -> None:
    alices = [a_schedule(prompt="canary ALICESCHED1"), a_schedule(prompt="canary ALICESCHED2", rule="")]
    bobs = a_schedule(BOB, prompt="canary BOBSCHED")
    for schedule in (*alices, bobs):
        await store.add_schedule(schedule)
        assert await store.claim_slot(schedule.id, NOW, at=NOW, late_by=0)
    await store.record_missed(alices[0].id, NOW - DAY, at=NOW)

    found = await store.forget_person(ALICE)

    assert found.schedules == 2
    assert await store.schedules_of(ALICE.id, include_ended=True) == []
    assert [s.id for s in await store.schedules_of(BOB.id)] == [bobs.id]
    rows = await store_backend.rows("SELECT schedule_id FROM schedule_runs")
    assert rows == [(bobs.id,)]
    stored = b"".join(await store_backend.everything_stored())
    assert b"ALICESCHED" not in stored and b"BOBSCHED" in stored
    assert (await store.forget_person(ALICE)).schedules == 0


async def test_a_persons_export_lists_their_schedules_and_runs(store: ConversationStore) -> None:
    mine = a_schedule(key=GENERAL, place="#general", prompt="post the AQI for A1001")
    await store.add_schedule(mine)
    await store.add_schedule(a_schedule(BOB, prompt="bob's own"))
    assert await store.claim_slot(mine.id, NOW, at=NOW + 5, late_by=5)
    await store.finish_run(mine.id, NOW, "answered", at=NOW + 20)

    document = await store.export_person(ALICE)

    [listed] = document["schedules"]
    assert listed["id"] == mine.id and listed["prompt"] == "post the AQI for A1001"
    assert (listed["channel"], listed["place"], listed["rule"], listed["timezone"]) == (
        "CGEN",
        "#general",
        "FREQ=DAILY",
        "Europe/Paris",
    )
    assert (listed["status"], listed["last_outcome"]) == ("active", "answered")
    [run] = document["schedule_runs"]
    assert (run["schedule_id"], run["slot"], run["status"], run["late_by"]) == (mine.id, NOW, "answered", 5)
    assert "bob's own" not in str(document)
    assert (await store.export_person(BOB))["schedule_runs"] == []


async def test_processes_claiming_the_same_slots_at_once_run_each_slot_once(
    store: ConversationStore, store_backend: Backend
) -> None:
    """Three processes on one database, each claiming every slot of five schedules at the same
    moment in an order of its own: every slot is won by exactly one of them."""
    schedules = [a_schedule() for _ in range(5)]
    for schedule in schedules:
        await store.add_schedule(schedule)
    ids = ",".join(s.id for s in schedules)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(REPO / "tests" / "schedule_claimer.py"),
            store_backend.location,
            ids,
            str(NOW),
            "20",
            str(seed),
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for seed in range(3)
    ]
    won = [(sid, float(slot)) for sid, slot in await released_together(processes)]
    expected = {(s.id, NOW + i * 3600.0) for s in schedules for i in range(20)}
    assert len(won) == len(expected) and set(won) == expected
    assert len(await store_backend.rows("SELECT 1 FROM schedule_runs")) == len(expected)

"""The terminal chat runs its person's schedules while it is open: at start it says which slots
passed unrun and which it runs late, runs the due one once (its answer printed between prompts, with
how to stop it), and `/schedules` lists the person's own and pauses or cancels one, never another
login's.

nerve runs as a person runs it (a pseudo-terminal) on its own SQLite database, against the approvals
test server (tests/mcp_servers/trust.py) and the local fake model service.
"""

from __future__ import annotations

import time
from pathlib import Path

from adapters.settings import PLATFORMS
from bot.schedules import timing
from bot.store.schedules import new_schedule_id
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Person, Schedule
from tests.fakes.llm_server import FakeLLMServer, reply, tool_reply
from tests.test_terminal import PROMPT, nerve, terminal
from tests.test_terminal_approvals import USER, append, asked, env_for

MINUTE, HOUR, DAY = 60.0, 3600.0, 86_400.0


def a_schedule(login: str, prompt: str, first_at: float, rule: str = "") -> Schedule:
    key = ConversationKey(platform="terminal", workspace=login, channel="cli", thread="default")
    return Schedule(
        id=new_schedule_id(),
        owner=Person.of(key, login, PLATFORMS).id,
        owner_user=login,
        key=key,
        place="",
        prompt=prompt,
        first_at=first_at,
        rule=rule,
        timezone="Europe/Paris",
        status="active",
        created_at=first_at - DAY,
    )


async def test_the_chat_runs_a_due_schedule_once_and_lists_and_changes_its_persons_own(
    tmp_path: Path,
) -> None:
    db = tmp_path / "nerve.db"
    now = time.time()
    late = a_schedule(USER, "check the air in A1001", now - 17 * MINUTE)
    missed = a_schedule(USER, "water the plants", now - 3 * HOUR)
    daily = a_schedule(USER, "post the AQI", now + DAY, "FREQ=DAILY")
    bobs = a_schedule("bob", "BOB-CANARY bob's reminder", now + DAY)
    store = await SQLiteStore.open(db)
    try:
        for schedule in (late, missed, daily, bobs):
            await store.add_schedule(schedule)
    finally:
        await store.close()
    notes = tmp_path / "notes.txt"
    notes.write_text("")

    async with FakeLLMServer([reply("The air in A1001 is fine: AQI 21.")]) as model:
        env = env_for(tmp_path, notes, model, NERVE_DB=str(db))
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            await term.expect(b"Missed while nerve was not running:", after=0)
            await term.expect(f"{missed.id} 'water the plants'".encode())
            await term.expect(b"Running late:")
            await term.expect(f"{late.id} 'check the air in A1001' (due at".encode())
            await term.expect(b"Scheduled:")
            answer = await term.expect(b"The air in A1001 is fine: AQI 21.")
            at = await term.expect(
                f"Scheduled run ({late.id}) — stop it with /schedules cancel {late.id}".encode(),
                after=answer,
            )
            at = await term.expect(PROMPT, after=at)

            term.type(b"/schedules\r")
            upcoming = timing.next_slots(daily.first_at, daily.rule, daily.timezone, now, 1)[0]
            at = await term.expect(f"{daily.id} [active] 'post the AQI'".encode(), after=at)
            at = await term.expect(f"next: {timing.local_text(upcoming, 'Europe/Paris')}".encode(), after=at)
            at = await term.expect(b"last: not run yet", after=at)
            at = await term.expect(PROMPT, after=at)
            term.type(f"/schedules pause {daily.id}\r".encode())
            at = await term.expect(f"Paused {daily.id}.".encode(), after=at)
            term.type(f"/schedules cancel {bobs.id}\r".encode())
            at = await term.expect(f"{bobs.id} is not yours to change.".encode(), after=at)
            term.type(f"/schedules cancel {daily.id}\r".encode())
            at = await term.expect(f"Cancelled {daily.id}.".encode(), after=at)
            term.type(b"/schedules\r")
            at = await term.expect(b"You have no schedules.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert len(model.requests) == 1  # the late slot, once; the missed one never
        assert "check the air in A1001" in str(model.requests[0]["messages"][-1]["content"])
    assert b"BOB-CANARY" not in term.output

    store = await SQLiteStore.open(db)
    try:
        assert [(r.status, r.note) for r in await store.runs_of(late.id)] == [("answered", None)]
        assert [r.status for r in await store.runs_of(missed.id)] == ["missed"]
        assert (await store.schedule(daily.id)).status == "cancelled"  # type: ignore[union-attr]
        assert (await store.schedule(bobs.id)).status == "active"  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_scheduled_run_that_needs_a_decision_waits_for_its_person_at_the_prompt(
    tmp_path: Path,
) -> None:
    db = tmp_path / "nerve.db"
    due = a_schedule(USER, "append the daily line to my notes", time.time() - MINUTE)
    store = await SQLiteStore.open(db)
    try:
        await store.add_schedule(due)
    finally:
        await store.close()
    notes = tmp_path / "notes.txt"
    script = [tool_reply(append("daily line", "call_a")), reply("Appended the daily line.")]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, notes, model, NERVE_DB=str(db))
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            at = await term.expect(b"It waits for your decision:", after=at)
            at = await term.expect(PROMPT, after=at)
            assert not notes.exists() or "daily line" not in notes.read_text()  # nothing ran unapproved
            term.type(b"\r")
            at = await term.expect(asked('append_note(text="daily line")'), after=at)
            term.type(b"y\r")
            at = await term.expect(b"Appended the daily line.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
    assert "daily line" in notes.read_text()


async def test_the_person_sets_sees_and_resets_their_time_zone_in_the_chat(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    async with FakeLLMServer([]) as model:
        env = env_for(tmp_path, notes, model, NERVE_DB=str(tmp_path / "nerve.db"), TZ="America/New_York")
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"/timezone\r")
            at = await term.expect(b"Your time zone is America/New_York (it is", after=at)
            term.type(b"/timezone Mars/Olympus\r")
            at = await term.expect(b"'Mars/Olympus' is not a time zone", after=at)
            term.type(b"/timezone Asia/Tokyo\r")
            at = await term.expect(b"Your time zone is now Asia/Tokyo", after=at)
            term.type(b"/timezone\r")
            at = await term.expect(b"Your time zone is Asia/Tokyo (it is", after=at)
            term.type(b"/timezone reset\r")
            at = await term.expect(b"Your time zone is back to the default: America/New_York.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert model.requests == []


async def test_a_run_left_under_way_by_a_stopped_chat_goes_on_once_at_the_next_start(
    tmp_path: Path,
) -> None:
    db = tmp_path / "nerve.db"
    now = time.time()
    daily = a_schedule(USER, "check the air in A1001", now - 2 * MINUTE, "FREQ=DAILY")
    store = await SQLiteStore.open(db)
    try:
        await store.add_schedule(daily)
        # The chat that claimed it stopped before answering (its run lock went with it).
        assert await store.claim_slot(daily.id, daily.first_at, at=now - MINUTE, late_by=MINUTE)
    finally:
        await store.close()
    notes = tmp_path / "notes.txt"
    notes.write_text("")

    async with FakeLLMServer([reply("The air in A1001 is fine: AQI 21.")]) as model:
        env = env_for(tmp_path, notes, model, NERVE_DB=str(db))
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            at = await term.expect(f"The run of {daily.id} due".encode(), after=0)
            at = await term.expect(b"it goes on now.", after=at)
            at = await term.expect(b"The air in A1001 is fine: AQI 21.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert len(model.requests) == 1
    assert term.output.count(b"The air in A1001 is fine") == 1

    store = await SQLiteStore.open(db)
    try:
        assert [r.status for r in await store.runs_of(daily.id)] == ["answered"]
    finally:
        await store.close()

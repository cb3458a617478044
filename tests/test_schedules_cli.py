"""`nerve schedules` through the real command line, on SQLite and on PostgreSQL: every schedule still
in effect or a person's, as text and JSON, with its next run in its own zone and its last run; and an
operator's cancel, pause and resume, refused where the schedule's status does not allow it. It needs
the store alone: the servers file it is given cannot even be read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.schedules import timing
from bot.store.schedules import new_schedule_id
from bot.types import ConversationKey, Schedule
from tests.stores import Backend
from tests.test_cli import run_nerve
from tests.test_memory_cli import env_for

pytestmark = pytest.mark.both_stores

ALICE, BOB = "slack:T1:UALICE", "discord:42"
HOUR, DAY = 3600.0, 86_400.0


def a_schedule(owner: str, prompt: str, first_at: float, rule: str, **more: object) -> Schedule:
    platform = owner.split(":")[0]
    fields: dict[str, object] = {
        "id": new_schedule_id(),
        "owner": owner,
        "owner_user": owner.split(":")[-1],
        "key": ConversationKey(platform=platform, workspace="T1", channel="CGEN", thread=""),
        "place": "#general",
        "prompt": prompt,
        "first_at": first_at,
        "rule": rule,
        "timezone": "Europe/Paris",
        "status": "active",
        "created_at": first_at - DAY,
    } | more
    return Schedule(**fields)  # type: ignore[arg-type]


async def test_schedules_lists_changes_and_refuses_as_text_and_json(
    tmp_path: Path, store_backend: Backend
) -> None:
    start = float(int(time.time() // HOUR) * HOUR) - 2 * DAY  # on the hour, two days ago
    daily = a_schedule(ALICE, "post the AQI for A1001", start, "FREQ=DAILY", created_at=start - 2 * DAY)
    later = a_schedule(BOB, "ask whether the deploy finished", start + 10 * DAY, "", place="")
    async with await store_backend.open() as store:
        await store.add_schedule(daily)
        await store.add_schedule(later)
        assert await store.claim_slot(daily.id, start + DAY, at=start + DAY + 17 * 60, late_by=17 * 60)
        assert await store.finish_run(daily.id, start + DAY, "answered", at=start + DAY + 20 * 60)
    env = env_for(tmp_path, store_backend)

    code, out, err = await run_nerve("schedules", "--json", env=env)
    assert code == 0, err
    listed = json.loads(out)["schedules"]
    assert [s["id"] for s in listed] == [daily.id, later.id]  # oldest first
    first = listed[0]
    upcoming = timing.next_slots(start, "FREQ=DAILY", "Europe/Paris", time.time(), 1)[0]
    assert (first["prompt"], first["place"], first["status"], first["owner"]) == (
        "post the AQI for A1001",
        "#general",
        "active",
        ALICE,
    )
    assert first["next_run"] == upcoming
    assert first["next_run_local"] == timing.local_text(upcoming, "Europe/Paris")
    assert first["last_run"]["status"] == "answered" and first["last_run"]["late_by"] == 17 * 60
    assert "run at" in first["last_run"]["local"]
    assert listed[1]["last_run"] is None and listed[1]["place"] == "discord CGEN"

    code, out, err = await run_nerve("schedules", "--user", BOB, "--json", env=env)
    assert [s["id"] for s in json.loads(out)["schedules"]] == [later.id]

    code, out, err = await run_nerve("schedules", env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{daily.id} [active] 'post the AQI for A1001' — #general, FREQ=DAILY")
    assert f"next: {timing.local_text(upcoming, 'Europe/Paris')}" in lines[0]
    assert "answered (due at" in lines[0] and lines[0].endswith(f"by {ALICE}")
    assert "not run yet" in lines[1]

    code, out, err = await run_nerve("schedules", "pause", daily.id, env=env)
    assert (code, out.split()[0]) == (0, "Paused"), err
    code, out, err = await run_nerve("schedules", "pause", daily.id, env=env)
    assert code == 1 and "is paused: it cannot be paused" in err
    code, out, err = await run_nerve("schedules", "resume", daily.id, env=env)
    assert (code, out.split()[:2]) == (0, ["Resumed", daily.id]), err
    code, out, err = await run_nerve("schedules", "cancel", later.id, env=env)
    assert code == 0 and f"Cancelled {later.id} ({BOB})" in out, err
    code, out, err = await run_nerve("schedules", "resume", later.id, env=env)
    assert code == 1 and "is cancelled" in err
    code, out, err = await run_nerve("schedules", "cancel", "s00000000", env=env)
    assert code == 1 and "no schedule with id 's00000000'" in err

    async with await store_backend.open() as store:
        assert (await store.schedule(later.id)).status == "cancelled"  # type: ignore[union-attr]
        resumed = await store.schedule(daily.id)
        assert resumed is not None and (resumed.status, resumed.changed_by) == ("active", "operator")
    code, out, err = await run_nerve("schedules", "--user", BOB, env=env)
    assert code == 0 and out.strip() == f"No schedules of {BOB}."

"""A burst of schedules due at one instant ("every weekday at 09:00" is what most people pick): how
soon one process has started every run, how late each started, and that each ran once.

`SCHEDULES` schedules on the SQLite store, all due at the same instant, run by one `ScheduleRunner`
with the product's cadence and limit of runs under way; each run is a stand-in turn that takes
`TURN_SECONDS` (the model and tools are not what is measured here, the runner is). Real clock, real
store, real turn lock. Figures: seconds from the slot until the last run started, lateness p50 / p95
/ max, runs, and runs duplicated or lost (both must be 0). The goal: every run started within
`GOAL_SECONDS`, far inside the default grace (an hour), so a burst never turns into missed runs.

Run it alone with `python -m bench --only schedules`.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bot.schedules.runner import ScheduleRunner
from bot.schedules.slots import RunOutcome
from bot.store.schedules import new_schedule_id
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Schedule

SCHEDULES = 200
TURN_SECONDS = 0.2
GOAL_SECONDS = 30.0
LEAD = 1.0  # seconds between creating the schedules and their slot


def _schedule(index: int, due: float) -> Schedule:
    key = ConversationKey(platform="terminal", workspace=f"user{index}", channel="cli", thread="default")
    return Schedule(
        id=new_schedule_id(),
        owner=f"terminal:user{index}:user{index}",
        owner_user=f"user{index}",
        key=key,
        place="",
        prompt=f"reminder {index}",
        first_at=due,
        rule="FREQ=DAILY",
        timezone="Europe/Paris",
        status="active",
        created_at=due - 86_400,
    )


async def burst(schedules: int = SCHEDULES, turn_seconds: float = TURN_SECONDS) -> dict[str, Any]:
    started: list[tuple[str, float, float]] = []
    everyone = asyncio.Event()

    async def start(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        started.append((schedule.id, slot, time.time() - slot))
        if len(started) >= schedules:
            everyone.set()
        await asyncio.sleep(turn_seconds)
        return RunOutcome("answered")

    with tempfile.TemporaryDirectory(prefix="nerve-schedules-") as scratch:
        store = await SQLiteStore.open(Path(scratch) / "nerve.db")
        try:
            due = float(int(time.time() + LEAD + 1))
            for index in range(schedules):
                await store.add_schedule(_schedule(index, due))
            runner = ScheduleRunner(store, start, locks=store.turn_lock)
            forever = asyncio.create_task(runner.run_forever())
            try:
                await asyncio.wait_for(everyone.wait(), timeout=max(600.0, due - time.time() + 600))
                await runner.wait_for_runs()
            finally:
                forever.cancel()
                await asyncio.gather(forever, return_exceptions=True)
            rows = [run for schedule_id, _, _ in started for run in await store.runs_of(schedule_id)]
        finally:
            await store.close()
    lateness = sorted(late for _, _, late in started)
    per_slot = Counter((schedule_id, slot) for schedule_id, slot, _ in started)
    last = lateness[-1]
    return {
        "schedules": schedules,
        "turn_s": turn_seconds,
        "runs": len(started),
        # A slot run twice; a slot never answered (missed, failed or never started).
        "duplicated": sum(count - 1 for count in per_slot.values()),
        "lost": schedules - sum(1 for row in rows if row.status == "answered"),
        "last_start_after_slot_s": round(last, 2),
        "lateness_s": {
            "p50": round(statistics.median(lateness), 2),
            "p95": round(lateness[int(0.95 * (len(lateness) - 1))], 2),
            "max": round(last, 2),
        },
        "all_started_within_goal_goal_met": last <= GOAL_SECONDS,
    }


async def run() -> dict[str, Any]:
    return {"burst_at_one_instant": await burst()}


if __name__ == "__main__":
    import json

    print(json.dumps(asyncio.run(run()), indent=2))

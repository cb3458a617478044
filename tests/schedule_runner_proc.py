"""One process's schedule runner over a span of fake time, as one process of several would run it.

Run as `python tests/schedule_runner_proc.py DB_PATH_OR_URL FIRST LAST STEP`; it opens the store,
prints "ready", waits for a line on stdin (so that every process starts at once), then looks at the
schedules at FIRST, FIRST+STEP, … up to LAST (its clock jumps, no waiting), each run answered at
once, and prints the (schedule, slot) pairs it ran as JSON.
"""

from __future__ import annotations

import asyncio
import sys

from bot.schedules.runner import ScheduleRunner
from bot.schedules.slots import RunOutcome
from bot.types import Schedule
from tests.fakes.clock import Clock
from tests.proc_output import say_json
from tests.store_worker import open_store_at


async def main(location: str, first: float, last: float, step: float) -> None:
    ran: list[tuple[str, float]] = []

    async def start(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        ran.append((schedule.id, slot))
        return RunOutcome("answered")

    clock = Clock(first)
    async with await open_store_at(location) as store:
        runner = ScheduleRunner(store, start, locks=store.turn_lock, clock=clock)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        while clock.now <= last:
            await runner.tick()
            await runner.wait_for_runs()
            clock.now += step
    say_json(ran)


if __name__ == "__main__":
    location, first, last, step = sys.argv[1:5]
    asyncio.run(main(location, float(first), float(last), float(step)))

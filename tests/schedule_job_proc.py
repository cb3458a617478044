"""One nerve process running schedules on PostgreSQL: its runner queues due slots as jobs, and its
worker runs whichever slots' jobs it takes, as a front end with shared jobs does.

Run as `python -m tests.schedule_job_proc URL NAME STALL_TIMEOUT`: it opens the store and the jobs on
URL (a postgresql:// URL naming the test's schema), registers the schedule job's handler as a front
end does (`adapters.jobs_runtime`), runs a worker, prints `{"event": "ready"}` once it is registered
and listening, then obeys lines on stdin:

- `tick T`: its clock reads T from now on; it looks at the schedules (queues what is due, and queues
  again what a stopped process left with no job) and prints `{"event": "ticked"}`.
- `hang`: the next run it starts never ends (a turn under way when the process is killed).

Every run prints `{"event": "started", ...}` as `start` is called and `{"event": "finished", ...}` as
it returns, each at once, so that a test counts the runs even of a process it SIGKILLs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from adapters import jobs_runtime
from bot.jobs import open_turn_jobs
from bot.schedules.runner import ScheduleRunner
from bot.schedules.slots import RunOutcome
from bot.types import Schedule
from tests.fakes.clock import Clock
from tests.jobs_worker import listening
from tests.proc_output import say_json
from tests.store_worker import open_store_at

PLATFORM = "test"


def say(event: str, **more: Any) -> None:
    say_json({"event": event, **more})


async def main(url: str, name: str, stall_timeout: float) -> None:
    application = os.environ["PGAPPNAME"] = f"nerve-test-schedules-{os.getpid()}"
    clock = Clock(0.0)
    hang = asyncio.Event()

    async def start(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        say("started", schedule=schedule.id, slot=slot, by=name)
        if hang.is_set():
            hang.clear()
            say("hanging", schedule=schedule.id, slot=slot, by=name)
            await asyncio.Future()  # until the process is killed
        say("finished", schedule=schedule.id, slot=slot, by=name)
        return RunOutcome("answered")

    async with await open_store_at(url) as store:
        jobs = await open_turn_jobs(url, stall_timeout=stall_timeout)
        try:
            slots = jobs_runtime.slot_jobs(jobs, PLATFORM)
            runner = ScheduleRunner(store, start, locks=store.turn_lock, clock=clock, jobs=slots)
            for job, handler in jobs_runtime.schedule_handlers(PLATFORM, runner.run_slot).items():
                jobs.register(job, handler)
            jobs.run_worker(4)
            async with asyncio.timeout(20):
                while not jobs.worker_alive() or not await listening(url, application):  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            say("ready")
            while line := await asyncio.to_thread(sys.stdin.readline):
                command, _, argument = line.strip().partition(" ")
                if command == "tick":
                    clock.now = float(argument)
                    await runner.tick()
                    await runner.hand_on()
                    say("ticked")
                elif command == "hang":
                    hang.set()
            await jobs.drain(5.0)
        finally:
            await jobs.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))

"""nerve processes that run their schedules' real turns on a clock that runs fast, for the kill test.

Run as `python tests/scheduled_turns_proc.py`, with the environment a `nerve chat` reads (NERVE_DB,
NERVE_MCP_CONFIG, OPENAI_BASE_URL, NERVE_TURN_LEASE, …). It imports nerve once, prints
`{"imported": PID}`, then reads commands on stdin, one a line:

- `start BASE REAL0 SPEED CADENCE`: fork a nerve process, which prints `{"started": PID}`. It builds
  the runtime as `nerve chat` does (the settings from the environment, the store, the model client,
  the MCP host) and runs the terminal's schedules with the agent's schedule runner, each due slot as a
  real scheduled turn (`Agent.run_scheduled`). It prints `{"ready": PID}` once its runner looks at the
  schedules, and `{"start": ID, "slot": SLOT, "pid": PID}` / `{"answered": …}` around each run's
  turn. SIGTERM stops it the graceful way (the runs under way are left to be handed on).
- `reap PID`: wait for that process to end (the test SIGKILLs it itself) and print
  `{"ended": PID, "code": CODE}`.

The processes' clock is `BASE + (time.time() - REAL0) * SPEED`, the same in each of them, so a
schedule every five minutes comes due every few seconds; the runner looks every CADENCE (real)
seconds. Only the imports are done before the fork, so a start after a kill takes a fraction of a
second instead of two; each process opens its own store, connections and client, as a cold one does.
Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

import bot.model.client  # noqa: F401  (imported before the fork: `open_runtime` imports it late)
from adapters.settings import Settings
from adapters.terminal.platform import TERMINAL
from adapters.terminal.runtime import terminal_runtime
from bot.agent import RunOutcome
from bot.types import Schedule
from tests.proc_output import say_json


def say(**fields: Any) -> None:
    say_json(fields)


async def run_nerve(base: float, real0: float, speed: float, cadence: float) -> None:
    def clock() -> float:
        return base + (time.time() - real0) * speed

    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    pid = os.getpid()
    async with terminal_runtime(settings, servers_in_background=False) as (runtime, _):
        agent = runtime.agent

        async def start(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
            say(start=schedule.id, slot=slot, pid=pid)
            reply = await agent.run_scheduled(schedule, slot)
            if reply.failed:
                return RunOutcome("failed", "the model service failed")
            say(answered=schedule.id, slot=slot, pid=pid)
            return RunOutcome("answered")

        runner = agent.schedule_runner(
            start,
            mine=lambda schedule: schedule.key.platform == TERMINAL.name,
            grace=settings.nerve_schedule_grace,
            clock=clock,
            cadence=cadence,
        )
        forever = asyncio.create_task(runner.run_forever(), name="schedules")
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, forever.cancel)
        say(ready=pid)
        with contextlib.suppress(asyncio.CancelledError):
            await forever


def nerve(base: float, real0: float, speed: float, cadence: float) -> None:
    """The forked process: never returns to the loop that forked it (what it prints and logs is
    flushed line by line, so nothing is left to flush)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format=f"%(asctime)s {os.getpid()} %(name)s %(message)s"
    )
    try:
        say(started=os.getpid())
        asyncio.run(run_nerve(base, real0, speed, cadence))
    except BaseException:
        logging.exception("the nerve process failed")
        os._exit(1)
    os._exit(0)


def main() -> None:
    children: set[int] = set()
    say(imported=os.getpid())
    try:
        for line in sys.stdin:
            command, _, argument = line.strip().partition(" ")
            if command == "start":
                base, real0, speed, cadence = map(float, argument.split())
                # Nothing but imports ran here: no thread that a fork would leave half-copied.
                assert threading.active_count() == 1, threading.enumerate()
                pid = os.fork()
                if pid == 0:
                    nerve(base, real0, speed, cadence)
                children.add(pid)
            elif command == "reap":
                pid = int(argument)
                _, status = os.waitpid(pid, 0)
                children.discard(pid)
                say(ended=pid, code=os.waitstatus_to_exitcode(status))
    finally:
        for pid in children:  # the test ended early: leave no nerve behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    main()

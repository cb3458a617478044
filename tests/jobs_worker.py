"""A second nerve process with a job worker, for the cross-process tests of `bot.jobs`.

`python -m tests.jobs_worker URL NAME STALL_TIMEOUT [POLL_INTERVAL]` opens the jobs on URL (a
postgresql:// URL naming the test's schema), registers `recording_handler` under `TASK` as NAME,
runs a worker, prints `ready` once it is registered in the database and listening for new jobs, and
on SIGTERM drains (grace 5 s) and exits.

Every run of a job is a row of `runs` in the test's schema: started when the handler begins, ended
when it returns, so a test can count executions and compare their times across processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable

import psycopg

from bot.jobs import open_turn_jobs

TASK = "test.work"

RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    id           bigserial PRIMARY KEY,
    job          text NOT NULL,
    conversation text NOT NULL,
    worker       text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at     timestamptz
)
"""


def recording_handler(url: str, worker: str, *, fast: bool = False) -> Callable[..., Awaitable[None]]:
    """A job that records its run, takes `seconds` (no time at all when `fast`), then records its end.
    `seconds` may instead be `until:J1,J2`: the job lasts until runs of those jobs have started, so a
    test can show jobs running side by side without a window of wall-clock time."""

    async def handle(*, job: str, conversation: str, seconds: str) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "INSERT INTO runs (job, conversation, worker) VALUES (%s, %s, %s) RETURNING id",
                (job, conversation, worker),
            )
            row = await cursor.fetchone()
            assert row is not None
            if seconds.startswith("until:"):
                others = seconds.removeprefix("until:").split(",")
                while True:
                    cursor = await conn.execute(
                        "SELECT count(DISTINCT job) FROM runs WHERE job = ANY(%s)", (others,)
                    )
                    started = await cursor.fetchone()
                    if started is not None and started[0] == len(others):
                        break
                    await asyncio.sleep(0.05)
            elif not fast:
                await asyncio.sleep(float(seconds))
            await conn.execute("UPDATE runs SET ended_at = clock_timestamp() WHERE id = %s", (row[0],))

    return handle


async def listening(url: str, application: str) -> bool:
    """Whether this process's worker has sent its LISTEN: procrastinate registers a worker before
    its listener connects, and a job queued in between is seen only at the next poll, which the
    tests that turn polling off never reach."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'LISTEN %%'",
            (application,),
        )
        return await cursor.fetchone() is not None


async def main(url: str, name: str, stall_timeout: float, poll_interval: float | None = None) -> None:
    polling = {} if poll_interval is None else {"poll_interval": poll_interval}
    # Names this process's connections, so that `listening` finds its own listener.
    application = os.environ["PGAPPNAME"] = f"nerve-test-worker-{os.getpid()}"
    jobs = await open_turn_jobs(url, stall_timeout=stall_timeout, **polling)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        jobs.register(TASK, recording_handler(url, name))
        jobs.run_worker(4)
        async with asyncio.timeout(20):
            while not jobs.worker_alive() or not await listening(url, application):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        print("ready", flush=True)
        await stop.wait()
        await jobs.drain(5.0)
    finally:
        await jobs.aclose()


if __name__ == "__main__":
    poll = float(sys.argv[4]) if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), poll))

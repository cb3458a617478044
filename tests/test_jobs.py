"""The jobs every nerve process on one PostgreSQL database shares (`bot.jobs`, on procrastinate).

Each test gets a schema of its own on NERVE_TEST_DATABASE_URL (tests/stores.py), so procrastinate's
tables are installed there, not in public; when that server cannot be reached the tests fail. A
second worker is a real process (`tests/jobs_worker.py`), SIGKILLed where a test needs a crash.
Each job's runs are rows of `runs` (see `tests.jobs_worker.recording_handler`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from adapters.settings import Settings
from bot.errors import ConfigError, StoreError
from bot.jobs import TurnJobs, open_configured_jobs, open_turn_jobs, recovery
from bot.jobs import worker as worker_module
from bot.jobs.turns import DEFAULT_STALL_TIMEOUT
from tests.jobs_worker import RUNS_TABLE, TASK, recording_handler
from tests.stores import PostgresBackend, postgres_backend

REPO = Path(__file__).resolve().parent.parent
# Short enough that a killed worker's job is run again within a few seconds.
STALL = 2.0
# A poll this far away never finds a job within a test: whatever starts one was a notification.
NO_POLL = 600.0
# Longer than any test waits: a drain that waited for a job this long would fail.
LONG = 600.0
# A grace a drain must not wait out when its job ends sooner (0.5 s): a drain that did fails the
# test, in a minute rather than never.
LONG_GRACE = 60.0


@dataclass(frozen=True)
class Run:
    job: str
    conversation: str
    worker: str
    started_at: datetime
    ended_at: datetime | None


@pytest.fixture
async def pg() -> AsyncIterator[PostgresBackend]:
    async with postgres_backend() as backend:
        await backend.rows(RUNS_TABLE)
        yield backend


@contextlib.asynccontextmanager
async def opened(pg: PostgresBackend, **options: Any) -> AsyncIterator[TurnJobs]:
    jobs = await open_turn_jobs(pg.location, stall_timeout=STALL, **options)
    try:
        yield jobs
    finally:
        await jobs.aclose()


@contextlib.asynccontextmanager
async def worker_process(
    pg: PostgresBackend, name: str, *, poll_interval: float | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A second nerve process running a worker, ready when this yields; killed if still running after."""
    polling = [] if poll_interval is None else [str(poll_interval)]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.jobs_worker",
        pg.location,
        name,
        str(STALL),
        *polling,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        async with asyncio.timeout(20):
            line = await process.stdout.readline()
        if line.decode().strip() != "ready":
            await process.wait()
            pytest.fail(f"the worker process did not start: {(await process.stderr.read()).decode()}")
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def start_worker(jobs: TurnJobs, concurrency: int = 4) -> None:
    jobs.run_worker(concurrency)
    async with asyncio.timeout(10):
        while not jobs.worker_alive():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def enqueue(
    jobs: TurnJobs, job: str, conversation: str, seconds: float | str, *, event: str = ""
) -> bool:
    payload = {"job": job, "conversation": conversation, "seconds": str(seconds)}
    return await jobs.enqueue(TASK, payload, event=event or f"ev-{job}", conversation=conversation)


async def runs(pg: PostgresBackend) -> list[Run]:
    rows = await pg.rows("SELECT job, conversation, worker, started_at, ended_at FROM runs ORDER BY id")
    return [Run(*row) for row in rows]


async def until(pg: PostgresBackend, done: Any, within: float = 20.0) -> list[Run]:
    """The runs once `done(runs)` holds (polled: they are rows other processes write)."""
    seen: list[Run] = []
    try:
        async with asyncio.timeout(within):
            while not done(seen := await runs(pg)):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"gave up waiting after {within} s; runs so far: {seen}")
    return seen


def ended(*names: str) -> Any:
    return lambda seen: {r.job for r in seen if r.ended_at is not None} >= set(names)


def started(*names: str) -> Any:
    return lambda seen: {r.job for r in seen} >= set(names)


def only_run(seen: list[Run], job: str) -> Run:
    matching = [r for r in seen if r.job == job]
    assert len(matching) == 1, matching
    return matching[0]


# --- installing the schema ----------------------------------------------------------------------


async def test_two_processes_starting_at_once_install_procrastinate_once_in_their_own_schema(
    pg: PostgresBackend,
) -> None:
    first, second = await asyncio.gather(open_turn_jobs(pg.location), open_turn_jobs(pg.location))
    await first.aclose()
    await second.aclose()

    tables = await pg.rows(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'procrastinate_jobs'"
        " AND table_schema = ?",
        (pg.schema,),
    )
    assert tables == [(pg.schema,)]


async def test_an_installed_schema_is_left_alone_with_its_jobs(pg: PostgresBackend) -> None:
    async with opened(pg) as jobs:
        assert await enqueue(jobs, "A1", "conv-a", 0)
    async with opened(pg):
        pass

    assert await pg.rows("SELECT status FROM procrastinate_jobs") == [("todo",)]


async def test_a_url_that_is_not_postgresql_is_refused_with_what_to_set() -> None:
    with pytest.raises(ConfigError, match="NERVE_DATABASE_URL must be a PostgreSQL URL"):
        await open_turn_jobs("sqlite:///nerve.db")


async def test_the_settings_open_jobs_on_postgresql_only(pg: PostgresBackend, tmp_path: Path) -> None:
    on_sqlite = Settings(_env_file=None, nerve_db=tmp_path / "nerve.db")  # type: ignore[call-arg]
    on_postgres = Settings(  # type: ignore[call-arg]
        _env_file=None, nerve_database_url=SecretStr(pg.location), nerve_worker_stall_timeout=STALL
    )

    assert await open_configured_jobs(on_sqlite) is None
    jobs = await open_configured_jobs(on_postgres)
    assert jobs is not None
    try:
        assert jobs.schema == pg.schema
    finally:
        await jobs.aclose()


def test_importing_the_jobs_package_does_not_import_procrastinate() -> None:
    probe = "import sys, bot.jobs; print('procrastinate' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "False"


# --- enqueueing ---------------------------------------------------------------------------------


async def test_a_redelivered_event_enqueues_nothing(pg: PostgresBackend) -> None:
    async with opened(pg) as jobs:
        assert await enqueue(jobs, "A1", "conv-a", 0, event="Ev1") is True
        assert await enqueue(jobs, "A1-again", "conv-a", 0, event="Ev1") is False
        assert await enqueue(jobs, "A2", "conv-a", 0, event="Ev2") is True

    assert await pg.rows("SELECT queueing_lock FROM procrastinate_jobs ORDER BY id") == [("Ev1",), ("Ev2",)]


# --- running ------------------------------------------------------------------------------------


async def test_one_conversation_runs_in_order_across_processes_while_others_run_alongside(
    pg: PostgresBackend,
) -> None:
    # Neither process polls within the test: A2 can only start because A1's end woke a worker.
    async with opened(pg, poll_interval=NO_POLL) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main"))
        async with worker_process(pg, "other", poll_interval=NO_POLL):
            # A1 lasts until B1 and C1 have started, and B1 until C1 has: if a conversation waited for
            # another one, or this worker ran one job at a time, they would never end.
            assert await enqueue(jobs, "A1", "conv-a", "until:B1,C1")
            await until(pg, started("A1"))
            # A1 runs in the other process; this one is idle with room for four jobs.
            await start_worker(jobs)
            assert await enqueue(jobs, "A2", "conv-a", 0.3)
            assert await enqueue(jobs, "A3", "conv-a", 0.3)
            assert await enqueue(jobs, "B1", "conv-b", "until:C1")
            assert await enqueue(jobs, "C1", "conv-c", 0.3)
            seen = await until(pg, ended("A1", "A2", "A3", "B1", "C1"))
        await jobs.drain(5.0)

    a1, a2, a3 = (only_run(seen, job) for job in ("A1", "A2", "A3"))
    b1, c1 = only_run(seen, "B1"), only_run(seen, "C1")
    assert a1.worker == "other"
    assert a1.ended_at is not None and a2.ended_at is not None
    # The conversation waited for A1 in the other process although this one had room...
    assert a2.started_at >= a1.ended_at and a3.started_at >= a2.ended_at
    # ...and its next job started when A1 ended, woken by it: no worker polled meanwhile (NO_POLL).
    assert (a2.started_at - a1.ended_at).total_seconds() < NO_POLL / 10
    # Other conversations did not wait for it.
    assert b1.started_at < a1.ended_at and c1.started_at < a1.ended_at
    assert b1.ended_at is not None and c1.started_at < b1.ended_at


async def test_the_job_of_a_killed_worker_runs_again_elsewhere_once_and_its_conversation_goes_on(
    pg: PostgresBackend,
) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
        async with worker_process(pg, "doomed") as doomed:
            assert await enqueue(jobs, "K1", "conv-k", 60)
            assert await enqueue(jobs, "K2", "conv-k", 0)
            await until(pg, started("K1"))
            await start_worker(jobs)
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
            killed_at = time.monotonic()
            seen = await until(pg, ended("K1", "K2"), within=DEFAULT_STALL_TIMEOUT * 2)
            recovered_in = time.monotonic() - killed_at
        await asyncio.sleep(0.5)
        await jobs.drain(5.0)
        seen = await runs(pg)

    k1 = [r for r in seen if r.job == "K1"]
    assert [(r.worker, r.ended_at is not None) for r in k1] == [("doomed", False), ("main", True)]
    k2 = only_run(seen, "K2")
    assert k1[1].ended_at is not None and k2.started_at >= k1[1].ended_at
    # Taken for dead after the configured stall timeout (STALL), not the default one: generous, so a
    # busy machine passes, yet well short of what the default (30 s) would take.
    assert recovered_in < DEFAULT_STALL_TIMEOUT / 2


async def test_a_killed_workers_job_queued_again_meanwhile_is_run_once_by_the_waiting_job(
    pg: PostgresBackend,
) -> None:
    """Its event queued again while it ran (only one job of a queueing lock may wait): the dead one
    ends as aborted and the waiting one does the work, and the other dead jobs are put back all the
    same."""
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
        async with worker_process(pg, "doomed") as doomed:
            assert await enqueue(jobs, "Q1", "conv-q", 60, event="ev-q")
            assert await enqueue(jobs, "R1", "conv-r", 60)
            await until(pg, started("Q1", "R1"))
            assert await enqueue(jobs, "Q2", "conv-q", 0, event="ev-q")  # Q1 no longer waits
            await start_worker(jobs)
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
            seen = await until(pg, ended("Q2", "R1"), within=DEFAULT_STALL_TIMEOUT * 2)
        await jobs.drain(5.0)

    assert [(r.worker, r.ended_at is not None) for r in seen if r.job == "Q1"] == [("doomed", False)]
    assert only_run(seen, "Q2").worker == "main"
    assert [r.worker for r in seen if r.job == "R1"] == ["doomed", "main"]
    assert await pg.rows("SELECT status FROM procrastinate_jobs WHERE status <> 'succeeded'") == [
        ("aborted",)
    ]


async def test_drain_lets_a_running_job_finish_within_grace(pg: PostgresBackend) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main"))
        await start_worker(jobs)
        assert await enqueue(jobs, "D1", "conv-d", 0.5)
        await until(pg, started("D1"))
        began = time.monotonic()
        await jobs.drain(LONG_GRACE)
        took = time.monotonic() - began
        assert not jobs.worker_alive()

    assert only_run(await runs(pg), "D1").ended_at is not None
    # The drain ended when the job did, not when its grace ran out.
    assert took < LONG_GRACE / 2
    assert await pg.rows("SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'") == [(0,)]


async def test_a_job_still_running_after_grace_goes_back_to_the_queue_for_another_process(
    pg: PostgresBackend,
) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "leaving"))
        await start_worker(jobs)
        assert await enqueue(jobs, "E1", "conv-e", LONG)
        await until(pg, started("E1"))
        began = time.monotonic()
        await jobs.drain(0.3)
        took = time.monotonic() - began

    # The drain ended at its grace, not when the job would have.
    assert 0.3 <= took < LONG / 10
    assert await pg.rows("SELECT status, attempts FROM procrastinate_jobs") == [("todo", 1)]
    async with opened(pg) as replica:
        replica.register(TASK, recording_handler(pg.location, "replica", fast=True))
        await start_worker(replica)
        seen = await until(pg, lambda seen: any(r.worker == "replica" and r.ended_at for r in seen))
        await replica.drain(5.0)

    assert [(r.worker, r.ended_at is not None) for r in seen] == [("leaving", False), ("replica", True)]


async def status_of(pg: PostgresBackend, job: str) -> str | None:
    rows = await pg.rows("SELECT status FROM procrastinate_jobs WHERE args->>'job' = ?", (job,))
    return str(rows[0][0]) if rows else None


async def test_a_job_whose_worker_died_five_times_is_given_up_while_others_run_again(
    pg: PostgresBackend,
) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
        assert await enqueue(jobs, "P1", "conv-p", 0)
        assert await enqueue(jobs, "Q1", "conv-q", 0)
        # Both taken by a worker that has been silent for an hour; P1 had been started four times.
        [(dead,)] = await pg.rows(
            "INSERT INTO procrastinate_workers (last_heartbeat)"
            " VALUES (now() - interval '1 hour') RETURNING id"
        )
        await pg.rows(
            "UPDATE procrastinate_jobs SET status = 'doing', worker_id = ?,"
            " attempts = CASE WHEN lock = 'conv-p' THEN 4 ELSE 0 END",
            (dead,),
        )
        await start_worker(jobs)
        seen = await until(pg, ended("Q1"))
        await asyncio.sleep(0.5)
        await jobs.drain(5.0)
        assert await status_of(pg, "P1") == "failed"

    assert [r.job for r in seen] == ["Q1"]


async def test_a_worker_taken_for_dead_by_another_process_starts_again_and_takes_jobs(
    pg: PostgresBackend,
) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
        await start_worker(jobs)
        # Another process pruned this worker (it missed its heartbeats); its next fetch fails.
        await pg.rows("DELETE FROM procrastinate_workers")
        assert await enqueue(jobs, "R1", "conv-r", 0)
        seen = await until(pg, ended("R1"))
        assert jobs.worker_alive()
        await jobs.drain(5.0)

    assert [r.job for r in seen] == ["R1"]
    assert len(await pg.rows("SELECT id FROM procrastinate_workers")) == 0


async def test_a_draining_worker_keeps_its_jobs_however_long_the_grace(pg: PostgresBackend) -> None:
    async with opened(pg) as jobs:
        jobs.register(TASK, recording_handler(pg.location, "main"))
        await start_worker(jobs)
        assert await enqueue(jobs, "F1", "conv-f", 3 * STALL)
        await until(pg, started("F1"))
        async with worker_process(pg, "other"):
            # Longer than the stall timeout: the other process must still see this one beating.
            await jobs.drain(10.0)
            seen = await runs(pg)

    assert [(r.job, r.worker, r.ended_at is not None) for r in seen] == [("F1", "main", True)]


async def test_a_drain_ends_even_when_a_job_swallows_its_cancel_and_the_job_runs_again_elsewhere(
    pg: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "DRAIN_ALLOWANCE", 0.5)
    began = asyncio.Event()

    async def stubborn(*, job: str, conversation: str, seconds: str) -> None:
        began.set()
        try:
            await asyncio.sleep(LONG)
        except asyncio.CancelledError:
            await asyncio.sleep(LONG)  # a cleanup that swallows the cancel, as libraries sometimes do

    async with opened(pg) as jobs:
        jobs.register(TASK, stubborn)
        await start_worker(jobs)
        assert await enqueue(jobs, "S1", "conv-s", LONG)
        async with asyncio.timeout(20):
            await began.wait()
        # Unbounded before: procrastinate's abort waits for the job, which never ends.
        async with asyncio.timeout(60):
            await jobs.drain(0.2)
        assert not jobs.worker_alive()
        async with worker_process(pg, "other"):
            seen = await until(pg, started("S1"))

    assert [(r.job, r.worker) for r in seen] == [("S1", "other")]


async def test_recovery_stops_when_its_cancel_comes_out_of_the_database_driver_as_another_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds = 0

    async def round_whose_cancel_becomes_a_driver_error(app: Any, **_: Any) -> list[int]:
        nonlocal rounds
        rounds += 1
        try:
            await asyncio.sleep(LONG)
        except asyncio.CancelledError:
            # What the rollback after a cancel raises once psycopg has closed the connection.
            raise psycopg.OperationalError("the connection is closed") from None
        return []

    monkeypatch.setattr(recovery, "recover_stalled_jobs", round_whose_cancel_becomes_a_driver_error)
    task = asyncio.create_task(recovery.keep_recovering(None, queues=["q"], stall_timeout=0.01, own=list))  # type: ignore[arg-type]
    async with asyncio.timeout(20):
        while rounds == 0:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    task.cancel()
    # Before: the error was logged as a failed round and the next one began, for ever.
    await asyncio.wait({task}, timeout=20)
    assert task.cancelled()
    assert rounds == 1


async def test_a_database_that_cannot_be_reached_is_a_store_error_saying_where() -> None:
    with pytest.raises(
        StoreError, match=r"cannot reach .*postgresql://nobody@127\.0\.0\.1:1/nerve"
    ) as refused:
        await open_turn_jobs("postgresql://nobody:secret@127.0.0.1:1/nerve")
    assert "secret" not in refused.value.message


# --- one queue per platform -----------------------------------------------------------------------


async def test_a_worker_takes_only_the_jobs_of_the_platforms_it_has_handlers_for(pg: PostgresBackend) -> None:
    async with opened(pg) as slack_side, opened(pg) as discord_side:
        slack_side.register("slack.event", recording_handler(pg.location, "slack-process", fast=True))
        discord_side.register("discord.event", recording_handler(pg.location, "discord-process", fast=True))
        await start_worker(slack_side)
        await start_worker(discord_side)
        for n in range(3):
            for side, name in ((slack_side, "slack.event"), (discord_side, "discord.event")):
                # Each process queues the other platform's jobs too: who queues does not matter.
                other = discord_side if side is slack_side else slack_side
                payload = {"job": f"{name}-{n}", "conversation": f"{name}-conv-{n}", "seconds": "0"}
                assert await other.enqueue(
                    name, payload, event=f"{name}:{n}", conversation=f"{name}-conv-{n}"
                )
        seen = await until(pg, lambda seen: len([r for r in seen if r.ended_at]) == 6)
        await asyncio.sleep(0.5)
        await asyncio.gather(slack_side.drain(5.0), discord_side.drain(5.0))

    assert (
        sorted((r.job.split("-")[0], r.worker) for r in seen)
        == [("discord.event", "discord-process")] * 3 + [("slack.event", "slack-process")] * 3
    )
    assert await pg.rows("SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'") == [(0,)]
    assert slack_side.queue_of("slack.event") == f"{slack_side.queue}-slack"


async def test_a_job_waiting_in_another_platforms_queue_counts_as_pending(pg: PostgresBackend) -> None:
    async with opened(pg) as slack_side, opened(pg) as discord_side:
        slack_side.register("slack.event", recording_handler(pg.location, "slack-process", fast=True))
        payload = {"job": "d1", "conversation": "c", "seconds": "0"}
        assert await slack_side.enqueue("discord.event", payload, event="discord:d1", conversation="c")

        assert await discord_side.pending("discord:d1")
        assert await slack_side.pending("discord:d1")
        assert not await slack_side.pending("discord:d2")


async def test_a_worker_needs_a_handler_to_know_its_queues(pg: PostgresBackend) -> None:
    async with opened(pg) as jobs:
        with pytest.raises(RuntimeError, match="register"):
            jobs.run_worker(1)


async def test_a_recovery_loop_that_swallows_a_cancel_is_cancelled_until_it_ends() -> None:
    """A cancel taken back inside a database call must not leave the worker's restart waiting forever."""
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]  # as a driver's timeout may
            swallowed.set()
        await asyncio.Event().wait()  # goes on until cancelled again

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    ending = asyncio.create_task(worker_module._cancelled(task))
    done, _ = await asyncio.wait({ending}, timeout=30)
    for left in (ending, task):  # nothing left running after a failure
        left.cancel()
    assert ending in done, "the swallowed cancel was never tried again"
    assert swallowed.is_set() and task.cancelled()

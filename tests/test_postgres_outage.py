"""nerve on PostgreSQL through a database outage: the real pools, worker and Slack intake against the
real server, reached through a TCP relay the test cuts (every connection dropped, new ones refused)
and restores, as a replica sees its database host fail and come back.

What must hold: a process never takes its own worker for dead, and its worker takes jobs again once
the database is back; `/readyz` is ready within seconds of the return however long the outage; a
Slack delivery during the outage is answered 503 within Slack's 3 s, and its retry once the database
is back is answered exactly once; the log says "unreachable" once, not once per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import aiohttp
import psycopg
import pytest
from procrastinate import App
from procrastinate.exceptions import ConnectorException
from psycopg_pool.base import AttemptWithBackoff

import bot.jobs.turns
from adapters.ops_http import OpsEndpoints, PlatformLink, always
from adapters.slack.intake import INTAKE_WAIT_SECONDS
from bot.errors import StoreError
from bot.jobs import TurnJobs, open_turn_jobs
from bot.jobs.worker import RESTART_PAUSE, WorkerRunner
from bot.store.postgres import POOL_WAIT_SECONDS, PostgresStore
from bot.store.postgres_connection import RECONNECT_PAUSE_LONGEST, SteadyPool
from bot.store.postgres_outage import OUTAGE, OutageLog
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.jobs_worker import RUNS_TABLE, TASK, recording_handler
from tests.stores import PostgresBackend, postgres_backend
from tests.test_jobs import ended, enqueue, start_worker, until
from tests.test_readyz_postgres import Agent, Relay, readiness, through
from tests.test_slack_harness import core, mention, settings_for, sign
from tests.test_slack_runner import running

# Far below the default 30 s, so an outage longer than it is short.
STALL = 1.5
# Slack gives up on an ack after 3 s: the intake waits at most INTAKE_WAIT_SECONDS for the database
# and then answers 503. A delivery that waited for the pool instead would take POOL_WAIT_SECONDS
# (30 s); the bound on each delivery is half that, so a busy machine passes, and the 3 s itself
# is held by the intake's own wait.
SLACK_ACK_LIMIT = 3.0
ACK_GIVE_UP = POOL_WAIT_SECONDS / 2


@contextlib.asynccontextmanager
async def relayed(backend: PostgresBackend) -> AsyncIterator[tuple[Relay, str]]:
    """A relay to the test server, and the backend's URL through it."""
    target = urlsplit(backend.location)
    relay = Relay(target.hostname or "127.0.0.1", target.port or 5432)
    await relay.start()
    try:
        yield relay, through(backend, relay)
    finally:
        with contextlib.suppress(Exception):
            await relay.cut()


async def until_true(check: object, within: float) -> float:
    """Seconds until `check()` holds, polled (the state is another task's); fails after `within`."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(within):
        while not check():  # type: ignore[operator]  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return loop.time() - began


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def test_after_an_outage_longer_than_the_stall_timeout_the_own_worker_goes_on_taking_jobs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with postgres_backend() as pg, relayed(pg) as (relay, url):
        await pg.rows(RUNS_TABLE)
        jobs: TurnJobs = await open_turn_jobs(url, stall_timeout=STALL)
        try:
            jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
            await start_worker(jobs)
            assert await enqueue(jobs, "before", "conv-o", 0)
            await until(pg, ended("before"))

            await relay.cut()
            # Longer than the stall timeout: the worker's last heartbeat is old when the database is back.
            await asyncio.sleep(3 * STALL)
            await relay.start()

            # Taking jobs again within a few seconds of the return, not after a growing backoff.
            await until_true(jobs.worker_alive, within=6.0)
            assert await enqueue(jobs, "after", "conv-o", 0)
            # Liveness: that it runs at all is the point (not taken for dead); a loaded machine is slow.
            await until(pg, ended("after"), within=60.0)
            # A few recovery rounds with the old heartbeat around: still never its own worker.
            await asyncio.sleep(STALL)
            assert jobs.worker_alive()
        finally:
            await jobs.aclose()

    assert not lines(caplog, "taken for dead"), [r.getMessage() for r in lines(caplog, "taken for dead")]
    # The outage is one line when it goes and one when it is back, at WARNING, without traceback.
    assert len(lines(caplog, "the database is unreachable")) == 1
    assert len(lines(caplog, "the database is reachable again")) == 1
    assert not lines(caplog, "error connecting")
    assert all(r.levelno <= logging.WARNING for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.levelno > logging.WARNING
    ]
    assert not [r for r in caplog.records if r.exc_info], "no traceback for what nerve handles itself"


async def test_a_job_that_ends_while_the_database_is_away_leaves_no_traceback_and_no_locked_conversation(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's end cannot be recorded at first; it is once the database is back, so the next job
    of the same conversation runs, and nothing is logged above a warning."""
    caplog.set_level(logging.INFO)
    # A statement waits this long for a connection before it fails (instead of 30 s), so the first
    # record of the job's end fails while the database is away.
    monkeypatch.setattr(bot.jobs.turns, "POOL_WAIT_SECONDS", 0.5)
    release = asyncio.Event()
    record = recording_handler("", "main", fast=True)

    async def held(*, job: str, conversation: str, seconds: str) -> None:
        if job == "held":
            await release.wait()
        await record(job=job, conversation=conversation, seconds=seconds)

    async with postgres_backend() as pg, relayed(pg) as (relay, url):
        await pg.rows(RUNS_TABLE)
        record = recording_handler(pg.location, "main", fast=True)  # its own connection, past the relay
        jobs: TurnJobs = await open_turn_jobs(url, stall_timeout=30.0)
        try:
            jobs.register(TASK, held)
            await start_worker(jobs)
            assert await enqueue(jobs, "held", "conv-h", 0)
            async with asyncio.timeout(20):
                while not await pg.rows("SELECT 1 FROM procrastinate_jobs WHERE status = 'doing'"):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await relay.cut()
            release.set()
            await until(pg, ended("held"))
            await asyncio.sleep(1.5)  # the first records of its end fail meanwhile
            await relay.start()

            async with asyncio.timeout(20):
                while True:  # with the short wait, a statement fails until the pool has reconnected
                    with contextlib.suppress(StoreError):
                        assert await enqueue(jobs, "next", "conv-h", 0)
                        break
                    await asyncio.sleep(0.1)
            await until(pg, ended("next"))
            async with asyncio.timeout(20):
                while await pg.rows("SELECT id FROM procrastinate_jobs"):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
        finally:
            await jobs.aclose()
    gc.collect()  # a task that failed unobserved is reported when it is collected
    assert not lines(caplog, "never retrieved")
    assert all(r.levelno <= logging.WARNING for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.levelno > logging.WARNING
    ]


async def test_readyz_is_ready_again_once_the_database_returns_after_an_outage() -> None:
    """End to end: the pools and the worker come back by themselves. How soon after a long outage is
    counted below (each pause they schedule stays short), not timed here: a wall-clock bound on a
    busy machine fails for the machine, not for nerve."""
    async with postgres_backend() as pg, relayed(pg) as (relay, url):
        await pg.rows(RUNS_TABLE)
        store = await PostgresStore.open(url)
        jobs = await open_turn_jobs(url, stall_timeout=STALL)
        try:
            jobs.register(TASK, recording_handler(pg.location, "main", fast=True))
            await start_worker(jobs)
            platform = PlatformLink("the terminal")
            platform.connected(always)
            ops = OpsEndpoints(Agent(store), platform)
            ops.worker = jobs.worker_alive  # ready means the worker takes jobs too, as in `nerve slack`
            async with ops.serving("127.0.0.1", 0) as base:
                assert base is not None
                assert await readiness(base) == (200, [])
                await relay.cut()
                async with asyncio.timeout(60):
                    while (await readiness(base))[0] != 503:  # noqa: ASYNC110 (another process's state)
                        await asyncio.sleep(0.1)
                await relay.start()
                async with asyncio.timeout(120):  # liveness only: the pauses are counted below
                    while await readiness(base) != (200, []):  # noqa: ASYNC110
                        await asyncio.sleep(0.1)
                assert jobs.worker_alive()
        finally:
            await jobs.aclose()
            await store.close()


class CountedRestarts(WorkerRunner):
    """A worker that cannot reach the database `failures` times; each pause before the next is
    recorded instead of slept."""

    def __init__(self, failures: int) -> None:
        super().__init__(cast(App, None), ("q",), 1, stall_timeout=STALL, poll_interval=1.0)
        self.failures = failures
        self.pauses: list[float] = []

    async def _run_once(self) -> None:
        if len(self.pauses) + 1 >= self.failures:
            self._draining.set()
        raise psycopg.OperationalError("connection failed: Connection refused")

    async def _pause(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def test_the_worker_tries_again_every_second_however_long_the_database_stays_away() -> None:
    """A worker that doubled its pause through an outage (1, 2, 4 … 30 s) would start again up to
    half a minute after the database returned; while it cannot reach it, it tries each second."""
    runner = CountedRestarts(failures=12)
    try:
        await runner._supervise()
    finally:
        OUTAGE.reachable()  # no outage left over for other tests
    assert len(runner.pauses) == 12
    assert max(runner.pauses) <= RESTART_PAUSE, runner.pauses


async def test_a_pool_tries_to_reconnect_every_few_seconds_however_long_the_database_stays_away() -> None:
    """psycopg_pool doubles its pause after each failed attempt (1, 2, 4, 8 … s), so after a long
    outage the database can be back for many seconds before the next attempt. Counted, not timed:
    each failed attempt's next pause, as the pool schedules it, stays within the cap."""
    pool = SteadyPool("postgresql://postgres@127.0.0.1:1/test", open=False, min_size=1)
    pauses: list[float] = []

    async def schedule_task(task: object, delay: float) -> None:
        pauses.append(delay)

    pool.schedule_task = schedule_task  # type: ignore[method-assign]
    attempt = AttemptWithBackoff(timeout=3600.0)
    for _ in range(8):
        await pool._add_connection(attempt)
    assert len(pauses) == 8
    assert max(pauses) <= RECONNECT_PAUSE_LONGEST * (1 + AttemptWithBackoff.DELAY_JITTER), pauses
    assert pauses[-1] >= RECONNECT_PAUSE_LONGEST / 2, "a pause, not a busy loop"


async def deliver(url: str, body: dict[str, object], retry: int = 0) -> tuple[int, dict[str, str], float]:
    """POST a signed delivery as Slack does (a retry says which); its status, headers and duration."""
    raw = json.dumps(body)
    headers = sign(raw) | (
        {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_error"} if retry else {}
    )
    loop = asyncio.get_running_loop()
    began = loop.time()
    # Bounded, so a delivery that hangs fails the test (twice the bound on a delivery) instead of
    # holding it for aiohttp's default five minutes.
    timeout = aiohttp.ClientTimeout(total=2 * ACK_GIVE_UP)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.post(url, data=raw, headers=headers) as response,
    ):
        await response.read()
        return response.status, dict(response.headers), loop.time() - began


async def test_a_mention_during_an_outage_is_refused_at_once_and_its_retry_answered_once_the_database_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    root = "1600000000.990001"
    async with postgres_backend() as pg, relayed(pg) as (relay, url):
        backend = PostgresBackend(pg.server_url, pg.schema)
        backend.location = url  # the store, and the jobs, reach PostgreSQL through the relay
        async with core(tmp_path, [reply("answered after the outage")], backend=backend) as c:
            settings = settings_for(c.slack, nerve_database_url=url)
            async with running(c.agent, settings) as events:
                body = mention(f"<@{BOT_USER_ID}> are you there?", channel="C0OUTAGE", ts=root)
                await relay.cut()
                status, headers, took = await deliver(events, body)
                # Within Slack's 3 s (by the intake's own wait), and a status Slack retries.
                assert INTAKE_WAIT_SECONDS < SLACK_ACK_LIMIT
                assert status == 503, status
                assert took < ACK_GIVE_UP, took
                assert headers.get("Retry-After")
                await relay.start()

                # Slack's retry, once the database is back (retried again while it still reconnects).
                retries = 0
                while status != 200:
                    retries += 1
                    assert retries <= 20, "the retry was never accepted once the database was back"
                    status, _, took = await deliver(events, body, retry=min(retries, 3))
                    assert took < ACK_GIVE_UP, took
                    if status != 200:
                        await asyncio.sleep(0.5)
                await c.inbox.wait_finished(str(body["event_id"]), within=30)
                # A later re-delivery of the same event adds nothing.
                assert (await deliver(events, body, retry=3))[0] == 200
                await asyncio.sleep(0.5)
        assert [p.text for p in c.slack.thread("C0OUTAGE", root)] == ["answered after the outage"]
        assert len(c.llm.requests) == 1

    refused = lines(caplog, "could not record Slack event")
    assert refused and all(r.levelno == logging.WARNING and not r.exc_info for r in refused)
    assert "answered 503 so Slack delivers it again" in refused[0].getMessage()
    assert not lines(caplog, "Failed to run a middleware function")
    assert all(r.levelno <= logging.WARNING for r in caplog.records), [
        r.getMessage() for r in caplog.records if r.levelno > logging.WARNING
    ]


def pool_line(text: str) -> logging.LogRecord:
    return logging.LogRecord(
        "psycopg.pool",
        logging.WARNING,
        __file__,
        1,
        "error connecting in %r: %s",
        ("nerve-store", text),
        None,
    )


def test_an_outage_is_one_line_when_it_goes_one_a_minute_while_it_stays_and_one_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    outage = OutageLog(clock=lambda: now[0], wall=lambda: 1_700_000_000.0)
    refused = "connection failed: Connection refused"
    with caplog.at_level(logging.INFO, logger="bot.store.postgres_outage"):
        # Four attempts a second for 150 s: every one of psycopg_pool's lines is dropped.
        for _ in range(600):
            assert outage.filter(pool_line(refused)) is False
            now[0] += 0.25
        # procrastinate's report of its listener's end, with its traceback: dropped too.
        try:
            raise ConnectorException() from psycopg.OperationalError(refused)
        except ConnectorException as exc:
            late = logging.LogRecord(
                "procrastinate.utils", logging.ERROR, __file__, 1, "listener error: %r", (exc,), None
            )
            late.exc_info = (type(exc), exc, exc.__traceback__)
        assert outage.filter(late) is False
        outage.reachable()
        outage.reachable()  # a second pool connecting says nothing more
        # Other lines of those loggers pass.
        assert outage.filter(
            logging.LogRecord("psycopg.pool", logging.INFO, __file__, 1, "adding new connection", (), None)
        )
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 4, said
    assert said[0] == f"the database is unreachable ({refused}); nerve keeps retrying"
    assert said[1].startswith("the database is still unreachable, since 22:13:20 UTC (60 s;")
    assert said[2].startswith("the database is still unreachable, since 22:13:20 UTC (120 s;")
    assert said[3] == "the database is reachable again after 150 s (unreachable since 22:13:20 UTC)"
    assert all(r.levelno == logging.WARNING and not r.exc_info for r in caplog.records)


async def test_a_worker_run_that_ends_late_with_the_error_of_an_outage_now_over_starts_no_second_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """procrastinate's worker can end with its dropped listener's error after the pool has reconnected
    and the outage has been said to be over: that is the old outage, reported late."""

    class EndsLate(WorkerRunner):
        runs = 0

        async def _run_once(self) -> None:
            self.runs += 1
            if self.runs == 1:
                OUTAGE.unreachable_now("connection failed: Connection refused")
                OUTAGE.reachable()  # the pool connected again
                raise psycopg.OperationalError("consuming input failed: server closed the connection")
            self._draining.set()  # the second run: started again, then drained

    OUTAGE.reachable()  # no outage left over from another test
    caplog.clear()
    with caplog.at_level(logging.INFO):
        runner = EndsLate(cast(App, None), ("q",), 1, stall_timeout=3.0, poll_interval=1.0)
        await runner._supervise()
    said = [r.getMessage() for r in caplog.records if r.name.startswith("bot.")]
    assert runner.runs == 2, "the worker was started again"
    assert len([line for line in said if "the database is unreachable" in line]) == 1, said
    assert len([line for line in said if "reachable again" in line]) == 1, said
    assert not [line for line in said if "job worker" in line], said

"""`nerve worker` as an operator runs it: the real process, on the real PostgreSQL (a schema of its
own), against the local Slack fake and the local model. No `nerve slack` receives the mention: the
test records it in the inbox and queues its job as a receiving process would, and the worker alone
answers it in the thread, serves /readyz while it runs and exits 0 on SIGTERM. Without
NERVE_DATABASE_URL or SLACK_BOT_TOKEN it refuses to start, in plain words.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import aiohttp

from adapters.jobs_runtime import EVENT, event_lock, job_name
from adapters.slack.events import Identity, classify, inbox_payload
from bot.jobs import open_turn_jobs
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, FakeSlack
from tests.stores import PostgresBackend, postgres_backend
from tests.test_cli import nerve_env, run_nerve
from tests.test_slack_harness import mention
from tests.test_slack_schedules import a_schedule as slack_schedule
from tests.test_slack_shutdown import nerve_running, slack_env
from tests.test_thread_lock import until

CHANNEL = "C0CHANNEL"
SERVING = re.compile(r"serving /healthz, /readyz and /metrics at (\S+)")
NO_DATABASE = "nerve worker shares jobs on PostgreSQL: set NERVE_DATABASE_URL"


async def record_and_queue(pg: PostgresBackend, body: dict[str, object]) -> None:
    """What a receiving `nerve slack` does with a mention on PostgreSQL: claim it in the inbox, then
    queue its job under the event's lock and the thread's conversation."""
    me = Identity(user_id=BOT_USER_ID, bot_id=BOT_ID)
    turn = classify(body, me, allow_bots=False, follow_threads=False, followed=lambda _key: False)
    assert turn is not None
    store = await pg.open()
    try:
        assert await store.claim_event("slack", turn.event_id, inbox_payload(body))
    finally:
        await store.close()
    jobs = await open_turn_jobs(pg.location)
    try:
        queued = await jobs.enqueue(
            job_name("slack", EVENT),
            {"event_id": turn.event_id},
            event=event_lock("slack", turn.event_id),
            conversation=str(turn.key),
        )
        assert queued
    finally:
        await jobs.aclose()


def texts(slack: FakeSlack, root: str) -> list[str]:
    return [post.text for post in slack.thread(CHANNEL, root)]


async def ready(http: aiohttp.ClientSession, base: str) -> tuple[int, dict[str, object]]:
    async with http.get(f"{base}/readyz") as response:
        return response.status, await response.json()


async def test_nerve_worker_answers_a_queued_slack_event_with_no_front_end_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    root = "1600000000.800100"
    # No trigger word of the example servers' tools: the model's first answer is the answer.
    body = mention(f"<@{BOT_USER_ID}> who are you?", ts=root)
    async with (
        postgres_backend() as pg,
        FakeSlack() as slack,
        FakeLLMServer([reply("I am nerve.")]) as llm,
        aiohttp.ClientSession() as http,
    ):
        await record_and_queue(pg, body)
        env = slack_env(tmp_path, slack, llm, NERVE_DATABASE_URL=pg.location)
        # Neither way of receiving events: the worker must need none.
        env.pop("SLACK_SIGNING_SECRET", None)

        async with nerve_running("worker", env) as worker:
            base = worker.ops_url
            try:
                await slack.wait_for(lambda s: texts(s, root) == ["I am nerve."], 60)
            except TimeoutError:
                raise AssertionError(f"posted {texts(slack, root)}:\n{worker.log()}") from None
            # The event is recorded as finished just after its answer went out.
            finished = [(body["event_id"], "done")]

            async def recorded_finished() -> bool:
                return await pg.rows("SELECT event_id, status FROM inbox") == finished

            await until(recorded_finished, 10)

            # Ready once the MCP servers are up: the worker takes jobs, Slack took the token.
            status, answer = await ready(http, base)
            for _ in range(150):
                if status == 200:
                    break
                await asyncio.sleep(0.1)
                status, answer = await ready(http, base)
            assert (status, answer) == (200, {"ready": True, "reasons": []}), worker.log()
            async with http.get(f"{base}/healthz") as health:
                assert health.status == 200

            assert await worker.stop() == 0, worker.log()

    # It checked the token, and it neither opened a socket nor served /slack/events.
    assert slack.calls_of("auth.test")
    assert not slack.calls_of("apps.connections.open")
    assert "serving Slack events" not in worker.log()
    assert len(llm.requests) == 1


async def test_nerve_worker_refuses_to_start_without_a_postgresql_database(tmp_path: Path) -> None:
    # A server that leaves a mark when it is started: a refused start starts nothing.
    started = tmp_path / "server-started"
    marking = {"command": sys.executable, "args": ["-c", f"open({str(started)!r}, 'w')"]}
    env = nerve_env(tmp_path, servers={"marking": marking}, SLACK_BOT_TOKEN="xoxb-test-token")
    env.pop("NERVE_DATABASE_URL", None)
    code, _, err = await run_nerve("worker", env=env)
    assert code == 2
    assert err.strip() == f"nerve: {NO_DATABASE}"
    assert not (tmp_path / "nerve.db").exists(), "it opened the SQLite store it cannot share"
    assert not started.exists(), "it started an MCP server before it refused"


async def test_nerve_worker_refuses_to_start_without_a_slack_bot_token(tmp_path: Path) -> None:
    env = nerve_env(tmp_path, servers={}, NERVE_DATABASE_URL="postgresql://nerve@127.0.0.1:1/nerve")
    env.pop("SLACK_BOT_TOKEN", None)
    code, _, err = await run_nerve("worker", env=env)
    assert code == 2
    assert err.startswith("nerve: ") and "SLACK_BOT_TOKEN" in err
    assert len(err.strip().splitlines()) == 1


async def test_nerve_worker_help_says_discord_turns_are_not_its_jobs(tmp_path: Path) -> None:
    code, out, _ = await run_nerve("worker", "--help", env=nerve_env(tmp_path))
    assert code == 0
    assert "Discord" in out and "shard" in out
    code, out, _ = await run_nerve("--help", env=nerve_env(tmp_path))
    assert "worker" in out


async def test_nerve_worker_alone_runs_a_due_slack_schedule_once(tmp_path: Path) -> None:
    """With no `nerve slack` up, a worker looks for due slots itself, queues and runs them."""
    # No trigger word of the example servers' tools in the prompt: the model's answer is the answer.
    due = slack_schedule(
        "remind me to stretch", float(int(time.time())) - 60, channel="D0ALICE", rule="FREQ=DAILY"
    )
    async with (
        postgres_backend() as pg,
        FakeSlack() as slack,
        FakeLLMServer([reply("Time to stretch.")]) as llm,
    ):
        async with await pg.open() as store:
            await store.add_schedule(due)
        env = slack_env(tmp_path, slack, llm, NERVE_DATABASE_URL=pg.location)
        env.pop("SLACK_SIGNING_SECRET", None)
        async with nerve_running("worker", env) as worker:
            try:
                await slack.wait_for(lambda s: any("Time to stretch." in p.text for p in s.posted), 60)
            except TimeoutError:
                raise AssertionError(worker.log()) from None

            async def answered() -> bool:
                return await pg.rows("SELECT status FROM schedule_runs") == [("answered",)]

            await until(answered, 30)
        assert [p.channel for p in slack.posted if "Time to stretch." in p.text] == ["D0ALICE"]
        assert len(llm.requests) == 1

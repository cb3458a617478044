"""`nerve slack` on PostgreSQL queues its turns as jobs (`adapters/jobs_runtime.py`): an event that a
process recorded but died before queueing is queued by the next process it reaches, whether Slack
re-delivers it or a process starts; a turn's job that runs twice posts its answer once.

Runs `run_slack` in this process on a PostgreSQL schema of its own, against the fake Slack and model.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import aiohttp
import pytest

from adapters.slack.events import inbox_payload
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.stores import postgres_backend
from tests.test_schedule_jobs import until
from tests.test_slack_harness import core, mention, settings_for, sign
from tests.test_slack_runner import running
from tests.test_slack_schedules import a_schedule as slack_schedule


async def _deliver(url: str, body: dict[str, object]) -> int:
    raw = json.dumps(body)
    async with aiohttp.ClientSession() as http, http.post(url, data=raw, headers=sign(raw)) as response:
        return response.status


async def test_a_redelivered_event_that_was_recorded_but_never_queued_is_queued_and_answered(
    tmp_path: Path,
) -> None:
    root = "1600000000.880001"
    async with postgres_backend() as pg, core(tmp_path, [reply("the answer")], backend=pg) as c:
        settings = settings_for(c.slack, nerve_database_url=pg.location)
        body = mention(f"<@{BOT_USER_ID}> hi", channel="C0ORPHAN", ts=root)
        async with running(c.agent, settings) as url:
            # Another process recorded it, then died before queueing it: Slack, never acked, retries.
            assert await c.store.claim_event("slack", str(body["event_id"]), inbox_payload(body))
            assert await _deliver(url, body) == 200
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
            assert await _deliver(url, body) == 200  # answered now: a later retry queues nothing
        assert [p.text for p in c.slack.thread("C0ORPHAN", root)] == ["the answer"]
        assert len(c.llm.requests) == 1


async def test_a_start_queues_the_events_left_unqueued_and_a_second_start_adds_nothing(
    tmp_path: Path,
) -> None:
    root = "1600000000.880101"
    async with postgres_backend() as pg, core(tmp_path, [reply("the answer")], backend=pg) as c:
        settings = settings_for(c.slack, nerve_database_url=pg.location)
        body = mention(f"<@{BOT_USER_ID}> hi", channel="C0LEFT", ts=root)
        assert await c.store.claim_event("slack", str(body["event_id"]), inbox_payload(body))
        async with running(c.agent, settings):
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
        async with running(c.agent, settings):
            pass
        assert [p.text for p in c.slack.thread("C0LEFT", root)] == ["the answer"]
        assert len(c.llm.requests) == 1
        # Its job ran and is gone (succeeded jobs are deleted); nothing waits, nothing failed.
        assert await pg.rows("SELECT task_name, status FROM procrastinate_jobs") == []


async def test_a_due_schedule_on_postgresql_is_one_job_that_posts_one_message_and_one_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    channel = "C0SCHEDULED"
    due = slack_schedule("post the AQI", float(int(time.time())) - 60, channel=channel, rule="FREQ=DAILY")
    caplog.set_level(logging.INFO, logger="bot.schedules.runner")
    async with postgres_backend() as pg, core(tmp_path, [reply("the scheduled answer")], backend=pg) as c:
        await c.store.add_schedule(due)
        settings = settings_for(c.slack, nerve_database_url=pg.location)
        async with running(c.agent, settings):
            await c.slack.wait_for(
                lambda s: any("the scheduled answer" in p.text for p in s.posted), within=60
            )

            async def answered() -> bool:  # its outcome is written just after the answer is posted
                return [r.status for r in await c.store.runs_of(due.id)] == ["answered"]

            await until("the run's outcome", answered, within=60)
        [announced] = c.slack.thread(channel, None)
        assert announced.text.startswith("⏰ Scheduled for <@U0ALICE>:")
        answers = [p for p in c.slack.thread(channel, announced.ts) if "the scheduled answer" in p.text]
        assert len(answers) == 1
        assert len(c.llm.requests) == 1
    # The slot went through the shared jobs, not a task of the process that looked.
    assert f"schedule {due.id}: the slot at {due.first_at} is queued" in caplog.text

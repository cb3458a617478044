"""Two nerve processes in Socket Mode on one PostgreSQL, each with its own connection to Slack: every
event, delivered over both connections (as Slack spreads events and retries over an app's
connections), is answered once, and a thread's answers come in the order of its questions.

Both run `run_slack` in this process (two agents on two stores of one schema, as two processes
would have), against the fake Slack's Socket Mode and the fake model.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from tests.fakes.llm_server import Reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.stores import postgres_backend
from tests.test_slack_harness import core, mention, settings_for
from tests.test_slack_runner import running

QUESTION = re.compile(r"question (q\d+)")
ROOT = "1600000000.660001"


def echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    found = QUESTION.search(str(users[-1]["content"])) if users else None
    return Reply(content=f"answer to {found.group(1)}" if found else "no question", delay=0.05)


async def test_two_socket_mode_processes_answer_each_event_once_in_order(tmp_path: Path) -> None:
    async with postgres_backend() as pg, core(tmp_path, echo, backend=pg) as c:
        second_store = await pg.open()
        model = OpenAILLM(
            model="test-model", base_url=c.llm.base_url, api_key=None, timeout=30, max_retries=0
        )
        second = Agent(llm=model, host=c.host, store=second_store, inbox=second_store, config=AgentConfig())
        settings = settings_for(
            c.slack, slack_app_token="xapp-test", slack_signing_secret=None, nerve_database_url=pg.location
        )
        try:
            async with running(c.agent, settings), running(second, settings):
                await c.slack.wait_for(lambda s: s.connections == 2)
                for n in range(8):
                    body = mention(
                        f"<@{BOT_USER_ID}> question q{n}",
                        channel="C0SOCKETS",
                        ts=ROOT if n == 0 else f"1600000000.66{n:04d}",
                        thread_ts=None if n == 0 else ROOT,
                    )
                    ids = {
                        await c.slack.send_envelope(body, to=0),
                        await c.slack.send_envelope(body, to=1, retry=1),
                    }
                    # The thread's next question once both connections acked this one.
                    await c.slack.wait_for(lambda s, ids=ids: ids <= {a.get("envelope_id") for a in s.acks})
                await c.slack.wait_for(lambda s: len(s.thread("C0SOCKETS", ROOT)) >= 8, within=30)
                await asyncio.sleep(0.5)  # a second answer would show now
        finally:
            with contextlib.suppress(Exception):
                await model.aclose()
            await second_store.close()
        answers = [p.text for p in c.slack.thread("C0SOCKETS", ROOT)]
        assert answers == [f"answer to q{n}" for n in range(8)]
        assert len(c.llm.requests) == 8

"""A question that parked its turn outlives `run_slack` being stopped and started again: a new bot
on the same database takes the click, opens the form, takes the answer and goes on with the turn in
its thread; or, nobody answering, the new bot's expiry sweep ends it and updates the message the
first bot posted.

The `asks` server serves Streamable HTTP on the 2026-07-28 revision, so it outlives the bot as a
remote server does; the bolt app runs under `run_slack` (HTTP mode) against the mock Slack Web API;
the model is the local fake model service, shared by both runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from adapters.slack.serve import run_slack
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from tests import test_slack_runner
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack, Posted
from tests.test_inputs import asks_server
from tests.test_slack_harness import mention, settings_for, sign
from tests.test_slack_inputs import ALICE, CHANNEL, buttons, click_payload, is_request, option, shown
from tests.test_slack_runner import running


@pytest.fixture(scope="module")
async def remote() -> AsyncIterator[ServerConfig]:
    """The `asks` server on 2026-07-28 over HTTP: it outlives each run of the bot, as a remote
    server does (shared by the module's tests)."""
    async with asks_server("http", "2026-07-28") as server:
        yield server


@contextlib.asynccontextmanager
async def nerve(
    db: Path, server: ServerConfig, llm: FakeLLMServer, slack: FakeSlack, clock: Clock | None = None
) -> AsyncIterator[str]:
    """One run of the bot as `nerve slack` builds it (the store parks turns and questions), served
    by `run_slack` until the block ends; yields the events URL. `clock` lets requests expire."""
    store = await SQLiteStore.open(db)
    model = OpenAILLM(model="test-model", base_url=llm.base_url, api_key=None, timeout=30, max_retries=0)
    try:
        async with MCPHost({"asks": server}, default_timeout=30.0) as host:
            async with asyncio.timeout(20):
                await host.wait_until_ready()
            agent = Agent(
                llm=model,
                host=host,
                store=store,
                inbox=store,
                turn_lock=store.turn_lock,
                approvals=store,
                inputs=store,
                config=AgentConfig(input_timeout=60, approval_timeout=60),
                clock=clock or time.time,
            )
            async with running(agent, settings_for(slack)) as url:
                yield url
    finally:
        await model.aclose()
        await store.close()


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any], *, form: bool = False) -> str:
    """A signed delivery: an event as JSON, or an interaction form-encoded as Slack sends it."""
    raw = urlencode({"payload": json.dumps(body)}) if form else json.dumps(body)
    headers = sign(raw)
    if form:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    async with http.post(url, data=raw, headers=headers) as response:
        assert response.status == 200
        return await response.text()


def thread(slack: FakeSlack, root: str) -> tuple[list[Posted], list[str]]:
    """The thread's request messages, and the texts of everything else in it."""
    posted = slack.thread(CHANNEL, root)
    return [p for p in posted if is_request(p)], [p.text for p in posted if not is_request(p)]


async def test_a_parked_question_is_answered_after_the_bot_restarts(
    tmp_path: Path, remote: ServerConfig
) -> None:
    db = tmp_path / "nerve.db"
    root = "1600000000.700100"
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "porch"}', id="c_porch")),
        reply("The porch will be green."),
    ]
    async with FakeSlack() as slack, FakeLLMServer(script) as llm, aiohttp.ClientSession() as http:
        async with nerve(db, remote, llm, slack) as url:
            await post(http, url, mention(f"<@{BOT_USER_ID}> pick a colour for the porch", ts=root))
            await slack.wait_for(
                lambda s: any("Waiting for your answer" in t for t in thread(s, root)[1]), 20
            )
        [question] = thread(slack, root)[0]
        assert set(buttons(question)) == {"fill", "decline"}
        assert len(llm.requests) == 1

        async with nerve(db, remote, llm, slack) as url:
            trigger = slack.trigger()
            await post(
                http, url, click_payload(question, buttons(question)["fill"], ALICE, trigger), form=True
            )
            await slack.wait_for(lambda s: bool(s.views), 10)
            [view] = slack.views
            assert view.trigger_id == trigger
            [block] = [b for b in view.current["blocks"] if b["type"] == "input"]
            picked = {"value": {"type": "static_select", "selected_option": option(block, "green")}}
            sent = slack.view_payload("view_submission", view, ALICE, {block["block_id"]: picked})
            assert await post(http, url, sent, form=True) == "", "a plain ack closes the form"
            await slack.wait_for(
                lambda s: any("The porch will be green." in t for t in thread(s, root)[1]), 20
            )
            await slack.wait_for(lambda _: buttons(question) == {}, 10)

        [question], texts = thread(slack, root)
        assert sum("The porch will be green." in t for t in texts) == 1
        assert "✅ Answered" in shown(question)
        assert slack.calls_of("chat.postEphemeral") == []
        [tool] = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "porch: green" in str(tool["content"])


async def test_a_parked_question_nobody_answers_expires_after_the_bot_restarts_on_its_first_message(
    tmp_path: Path, remote: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot that posted the question is gone; the new bot's sweep ends it: the message posted
    before the restart loses its buttons and says it expired, and the answer lands once."""
    # The sweep looks for expired requests every 50 ms rather than every 15 s.
    monkeypatch.setattr(test_slack_runner, "run_slack", functools.partial(run_slack, sweep_interval=0.05))
    db = tmp_path / "nerve.db"
    root = "1600000000.700200"
    clock = Clock(time.time())
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "shed"}', id="c_shed")),
        reply("Nobody picked a colour for the shed."),
    ]
    async with FakeSlack() as slack, FakeLLMServer(script) as llm, aiohttp.ClientSession() as http:
        async with nerve(db, remote, llm, slack, clock) as url:
            await post(http, url, mention(f"<@{BOT_USER_ID}> pick a colour for the shed", ts=root))
            await slack.wait_for(
                lambda s: any("Waiting for your answer" in t for t in thread(s, root)[1]), 20
            )
        [question] = thread(slack, root)[0]
        assert set(buttons(question)) == {"fill", "decline"}

        async with nerve(db, remote, llm, slack, clock):
            clock.now += 61
            await slack.wait_for(lambda s: any("Nobody picked a colour" in t for t in thread(s, root)[1]), 20)
            # The message is updated through the paced poster, beside the answer: wait for both.
            await slack.wait_for(lambda s: buttons(question) == {}, 10)

        [question], texts = thread(slack, root)
        assert "Expired" in shown(question)
        assert sum("Nobody picked a colour" in t for t in texts) == 1
        [tool] = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "shed: cancelled" in str(tool["content"])

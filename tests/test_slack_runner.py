"""`run_slack`: Socket Mode against a local websocket, restart recovery, and start-up errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import Settings
from adapters.slack.serve import run_slack
from bot.agent import Agent
from bot.errors import ConfigError
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import core, mention, settings_for, user_texts


@contextlib.asynccontextmanager
async def running(agent: Agent, settings: Settings) -> AsyncIterator[str]:
    """run_slack as a task, until the block ends; yields what it reported when ready."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_slack(agent, settings, host="127.0.0.1", ready=ready))
    try:
        async with asyncio.timeout(10):
            done, _ = await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        if task in done:
            task.result()  # raises what run_slack raised
        yield ready.result()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_socket_mode_acks_the_envelope_and_answers_once(tmp_path: Path) -> None:
    async with core(tmp_path, [reply("over the socket"), reply("and again")]) as c:
        settings = settings_for(c.slack, slack_app_token="xapp-test", slack_signing_secret=None)
        async with running(c.agent, settings) as mode:
            assert mode == "socket-mode"
            root = "1600000000.003000"
            body = mention(f"<@{BOT_USER_ID}> hi", ts=root)
            envelope_id = await c.slack.send_envelope(body)
            # A second connection (or a retry) delivering the same event is acked and ignored.
            second_id = await c.slack.send_envelope(body, retry=1)
            await c.slack.wait_for(
                lambda s: {a.get("envelope_id") for a in s.acks} >= {envelope_id, second_id}
            )
            # Turns of one thread run in arrival order: once a later one is done, a duplicate would be too.
            later = mention(f"<@{BOT_USER_ID}> more", thread_ts=root)
            await c.slack.send_envelope(later)
            await c.inbox.wait_finished(later["event_id"])
            assert [p.text for p in c.slack.thread("C0CHANNEL", root)] == ["over the socket", "and again"]
        assert len(c.llm.requests) == 2
        assert c.slack.calls_of("apps.connections.open")


async def test_an_event_claimed_but_unfinished_before_a_restart_is_answered_at_start(tmp_path: Path) -> None:
    async with core(tmp_path, [reply("sorry for the wait")]) as c:
        body = mention(f"<@{BOT_USER_ID}> still there?", ts="1600000000.003100")
        assert await c.store.claim_event("slack", body["event_id"], json.dumps(body))
        settings = settings_for(c.slack)
        async with running(c.agent, settings):
            await c.inbox.wait_finished(body["event_id"])
        assert await c.store.unfinished_events("slack") == []
        assert user_texts(c.llm.requests[0]) == ["still there?"]
        [post] = c.slack.thread("C0CHANNEL", "1600000000.003100")
        assert post.text == "sorry for the wait"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"slack_bot_token": None}, "SLACK_BOT_TOKEN"),
        ({"slack_app_token": None, "slack_signing_secret": None}, "SLACK_SIGNING_SECRET"),
    ],
)
async def test_missing_tokens_stop_the_start_with_a_message_naming_the_variable(
    tmp_path: Path, overrides: dict[str, Any], named: str
) -> None:
    async with core(tmp_path, []) as c:
        with pytest.raises(ConfigError, match=named):
            await run_slack(c.agent, settings_for(c.slack, **overrides))
        assert c.slack.calls == []

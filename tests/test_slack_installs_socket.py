""" "Add to Slack" in Socket Mode: the install pages on the operations port (nothing there accepts an
event), Bolt's OAuth flow against the fake Slack, and events over the socket answered with each
workspace's own token."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from adapters.settings import Settings
from adapters.slack.installs import REDIRECT_PATH
from adapters.slack.serve import EVENTS_PATH, run_slack
from bot.agent import Agent
from bot.installs import workspace_installs
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import core, mention, settings_for
from tests.test_slack_installs import SECRET_KEY, Browser, database_files, mention_in


@contextlib.asynccontextmanager
async def serving(agent: Agent, settings: Settings) -> AsyncIterator[str]:
    """run_slack in Socket Mode until the block ends; yields the operations server's base URL."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    ops: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_slack(agent, settings, host="127.0.0.1", ready=ready, ops_ready=ops))
    try:
        async with asyncio.timeout(10):
            done, _ = await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        if task in done:
            task.result()  # raises what run_slack raised
        assert ready.result() == "socket-mode"
        yield ops.result()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def status_of(method: str, url: str, **kwargs: Any) -> int:
    async with aiohttp.ClientSession() as http, http.request(method, url, **kwargs) as page:
        return page.status


async def test_add_to_slack_in_socket_mode_installs_and_answers_each_workspace_with_its_token(
    tmp_path: Path,
) -> None:
    async with core(tmp_path, [reply("hello alpha"), reply("hello beta")]) as c:
        c.agent.installs = workspace_installs(c.store, SECRET_KEY)
        settings = settings_for(
            c.slack,
            slack_bot_token=None,
            slack_signing_secret=None,
            slack_app_token="xapp-test",
            slack_client_id=c.slack.installs.client_id,
            slack_client_secret=c.slack.installs.client_secret,
            slack_authorize_url=c.slack.installs.url(c.slack.base),
            nerve_secret_key=SECRET_KEY,
        )
        async with serving(c.agent, settings) as base:
            c.slack.installs.redirect_uri = base + REDIRECT_PATH
            # The operations server takes no event: Socket Mode has no events endpoint.
            assert await status_of("POST", base + EVENTS_PATH, json=mention("hi")) in (404, 405)
            assert await status_of("GET", base + "/healthz") == 200

            alpha = c.slack.installs.add_workspace("T0000AAAA")
            beta = c.slack.installs.add_workspace("T0000BBBB")
            # A redirect whose state nerve never issued installs nothing.
            c.slack.installs.installing = alpha
            browser = Browser(base)
            status, _, authorize = await browser.get(f"{base}/slack/install")
            assert status == 302 and authorize is not None
            _, _, back = await browser.get(authorize)
            assert back is not None and "state=" in back
            code = back.split("code=")[1].split("&")[0]
            own = browser.cookie
            browser.cookie = "slack-app-oauth-state=forged"
            assert (await browser.get(f"{base}{REDIRECT_PATH}?code={code}&state=forged"))[0] == 401
            browser.cookie = own
            assert (await browser.get(back))[0] == 200  # the state it issued: installed
            assert (await browser.get(back))[0] == 401  # never twice
            c.slack.installs.installing = beta
            assert (await Browser(base).add_to_slack())[0] == 200

            assert c.agent.installs is not None
            found = await c.agent.installs.find("slack", "T0000AAAA")
            assert found is not None and found.value["bot_token"] == alpha.token
            stored = await c.store.stored_install("slack", "T0000AAAA")
            assert stored is not None and alpha.token.encode() not in stored.secret
            files = await asyncio.to_thread(database_files, tmp_path)
            assert files or os.environ.get("NERVE_TEST_STORE") == "postgres"
            assert all(alpha.token.encode() not in held for held in files)

            # Events over the socket, each answered with its own workspace's token.
            for workspace, channel in ((alpha, "C0ALPHA"), (beta, "C0BETA")):
                body = mention_in(workspace, "hello", channel=channel)
                await c.slack.send_envelope(body)
                await c.inbox.wait_finished(body["event_id"])
                [answer] = c.slack.thread(channel, body["event"]["ts"])
                assert answer.text == f"hello {'alpha' if workspace is alpha else 'beta'}"
            for workspace, channel in ((alpha, "C0ALPHA"), (beta, "C0BETA")):
                there = [
                    t
                    for _, t, b in c.slack.installs.tokens
                    if channel in (b.get("channel"), b.get("channel_id"))
                ]
                assert there and set(there) == {workspace.token}
            # A workspace that never installed nerve is not answered.
            stranger = c.slack.installs.add_workspace("T0000CCCC")
            body = mention_in(stranger, "hello", channel="C0STRANGER")
            envelope = await c.slack.send_envelope(body)
            await c.slack.wait_for(lambda s: envelope in {a.get("envelope_id") for a in s.acks})
        assert len(c.llm.requests) == 2 and c.slack.thread("C0STRANGER", body["event"]["ts"]) == []


async def test_socket_mode_with_one_bot_token_has_no_install_pages(tmp_path: Path) -> None:
    async with core(tmp_path, [reply("hi")]) as c:
        settings = settings_for(c.slack, slack_app_token="xapp-test", slack_signing_secret=None)
        async with serving(c.agent, settings) as base:
            assert await status_of("GET", f"{base}/slack/install", allow_redirects=False) == 404
            body = mention(f"<@{BOT_USER_ID}> hello", ts="1600000000.004000")
            await c.slack.send_envelope(body)
            await c.inbox.wait_finished(body["event_id"])
        assert set(c.slack.installs.used("chat.postMessage")) == {"xoxb-test-token"}

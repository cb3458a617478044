"""`nerve slack` and `nerve discord` say once they are up, at the default log level: where Slack's
events arrive (HTTP), as whom the Socket Mode connection is open, and as whom Discord is logged in
with how many guilds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.app import run_discord
from adapters.up_line import log_up
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_api import settings_for as discord_settings
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import core
from tests.test_slack_harness import settings_for as slack_settings
from tests.test_slack_runner import running


@pytest.fixture
def default_level() -> Iterator[None]:
    """The root logger at WARNING, nerve's default NERVE_LOG_LEVEL (`adapters.log_format`)."""
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(before)


def up_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "nerve.up" and r.levelno == logging.INFO]


async def test_slack_over_http_says_where_it_listens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, default_level: None
) -> None:
    async with core(tmp_path, []) as c, running(c.agent, slack_settings(c.slack)) as url:
        assert url.endswith("/slack/events")
        assert up_lines(caplog) == [f"serving Slack events and interactions at {url}"]


async def test_slack_in_socket_mode_says_as_whom_it_is_connected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, default_level: None
) -> None:
    async with core(tmp_path, []) as c:
        settings = slack_settings(c.slack, slack_app_token="xapp-test", slack_signing_secret=None)
        async with running(c.agent, settings) as mode:
            assert mode == "socket-mode"
            assert up_lines(caplog) == [f"Slack: Socket Mode connected as @nerve ({BOT_USER_ID})"]


async def test_discord_says_as_whom_it_is_logged_in_and_in_how_many_guilds(
    store: Any, caplog: pytest.LogCaptureFixture, default_level: None
) -> None:
    class Agent:
        inbox = store
        approvals = None

    async with FakeDiscord() as fake:
        runner = asyncio.create_task(run_discord(Agent(), discord_settings(fake)))  # type: ignore[arg-type]
        try:
            # discord.py holds `on_ready` back until no more guilds arrive (a couple of seconds).
            async with asyncio.timeout(30):
                while not up_lines(caplog):
                    assert not runner.done(), runner
                    await asyncio.sleep(0.05)
            assert up_lines(caplog) == [f"Discord: logged in as nerve ({fake.bot.id}) with 1 guild"]
        finally:
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner


def test_the_up_line_is_left_out_when_only_errors_are_wanted(caplog: pytest.LogCaptureFixture) -> None:
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.ERROR)
    try:
        log_up("Slack: listening on %s", "http://127.0.0.1:1/slack/events")
    finally:
        root.setLevel(before)
    assert up_lines(caplog) == []

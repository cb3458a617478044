"""A lost Socket Mode connection is one WARNING when it goes and one INFO line when it is back, not an
ERROR at every reconnect attempt: slack_sdk's real client against the local fake Slack, whose
outage closes the connection and refuses new ones until it ends."""

from __future__ import annotations

import asyncio
import logging

import pytest
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.socket_mode import CLIENT_LOGGER, socket_mode_handler
from tests.fakes.slack_api import FakeSlack

APP_TOKEN = "xapp-1-A0-socket-test"
BOT_TOKEN = "xoxb-socket-test"
# Short, so a test sees several failed attempts; nerve runs with slack_sdk's 10 s.
PING = 0.1
FAILED_ATTEMPTS = 5


class SaidBack(logging.Handler):
    """Sets its event when the line saying the connection is back is logged."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "is back after" in record.getMessage():
            self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


def refused_opens(slack: FakeSlack) -> int:
    return sum(1 for call in slack.calls_of("apps.connections.open") if not call.ok)


async def test_a_lost_connection_is_one_warning_then_one_line_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    back = SaidBack()
    logging.getLogger("adapters.slack.socket_mode").addHandler(back)
    async with FakeSlack() as slack:
        client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
        app = AsyncApp(client=client, signing_secret="unused-in-socket-mode")
        handler = socket_mode_handler(app, APP_TOKEN, client, ping_interval=PING)
        try:
            await handler.connect_async()  # type: ignore[no-untyped-call]
            await slack.wait_for(lambda s: s.connections == 1)

            await slack.start_outage()
            await slack.wait_for(lambda s: refused_opens(s) >= FAILED_ATTEMPTS, within=60)
            slack.end_outage()
            await slack.wait_for(lambda s: s.connections == 1, within=60)
            async with asyncio.timeout(30):
                await back.wait()
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            logging.getLogger("adapters.slack.socket_mode").removeHandler(back)

    shown = [r for r in caplog.records if r.levelno >= logging.INFO and "socket" in r.name]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    [lost] = [r for r in shown if r.levelno == logging.WARNING]
    assert lost.getMessage().startswith("Slack: Socket Mode connection lost ("), lost.getMessage()
    assert "s_" not in lost.getMessage() and lost.exc_info is None
    [back] = [r for r in shown if r.levelno == logging.INFO]
    assert back.getMessage().startswith("Slack: Socket Mode connection is back after"), back.getMessage()
    assert [lost, back] == shown
    assert not any(r.name == CLIENT_LOGGER and r.levelno > logging.DEBUG for r in caplog.records)

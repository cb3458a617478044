"""What the log says, and how loudly: expected conditions at INFO, every warning with its reason."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.post import Poster
from bot.jobs.recovery import keep_recovering


def test_a_workspace_without_streaming_messages_is_noted_at_info(caplog: pytest.LogCaptureFixture) -> None:
    poster = Poster(AsyncWebClient(token="xoxb-test"), pace=0.0)
    with caplog.at_level(logging.INFO, logger="adapters.slack.post"):
        poster.refuse_streams("T0TEAM")
        poster.refuse_streams("T0TEAM")
    [record] = [r for r in caplog.records if "has no streaming messages" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert "T0TEAM" in record.getMessage()


async def test_a_failed_look_for_dead_workers_says_why_even_without_a_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failed = asyncio.Event()

    def connection() -> Any:
        failed.set()
        raise TimeoutError()  # str() is empty

    app: Any = SimpleNamespace(connector=SimpleNamespace(pool=SimpleNamespace(connection=connection)))
    with caplog.at_level(logging.WARNING, logger="bot.jobs.recovery"):
        task = asyncio.create_task(keep_recovering(app, queues=["q"], stall_timeout=0.03, own=list))
        await asyncio.wait_for(failed.wait(), 10)
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    messages = [r.getMessage() for r in caplog.records if "dead workers" in r.getMessage()]
    assert messages[0] == "could not look for jobs of dead workers (trying again): TimeoutError()"

"""`nerve slack` on PostgreSQL end to end: the real process in HTTP mode with NERVE_DATABASE_URL set,
against the local Slack fake and the local model, answers a mention; after a restart the thread's
history is still there (it was in PostgreSQL, not in a SQLite file).
"""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.stores import Backend
from tests.test_slack_harness import mention, user_texts
from tests.test_slack_shutdown import deliver, nerve_slack, slack_env

CHANNEL = "C0CHANNEL"
EVENTS = re.compile(r"serving Slack events and interactions at (\S+)")


def texts(slack: FakeSlack, root: str) -> list[str]:
    return [post.text for post in slack.thread(CHANNEL, root)]


@pytest.mark.parametrize("store_backend", ["postgres"], indirect=True)
async def test_nerve_slack_on_postgresql_answers_and_remembers_the_thread_after_a_restart(
    tmp_path: Path, store_backend: Backend
) -> None:
    root = "1600000000.700100"
    servers = tmp_path / "mcp.json"
    servers.write_text('{"mcpServers": {}}')
    script = [reply("Sunny in 1010."), reply("Rain tomorrow, as I said it would be sunny today.")]
    async with FakeSlack() as slack, FakeLLMServer(script) as llm, aiohttp.ClientSession() as http:
        env = slack_env(
            tmp_path, slack, llm, NERVE_DATABASE_URL=store_backend.location, NERVE_MCP_CONFIG=str(servers)
        )

        async with nerve_slack(env) as nerve:
            url = nerve.events_url
            first = mention(f"<@{BOT_USER_ID}> weather in 1010?", ts=root)
            assert await deliver(http, url, first) == 200
            await slack.wait_for(lambda s: texts(s, root)[-1:] == ["Sunny in 1010."], 30)
            assert await nerve.stop() == 0, nerve.log()

        stored = await store_backend.rows("SELECT role, content FROM messages ORDER BY id")
        assert stored == [("user", "weather in 1010?"), ("assistant", "Sunny in 1010.")]
        assert await store_backend.rows("SELECT event_id, status FROM inbox") == [(first["event_id"], "done")]
        assert not (tmp_path / "nerve.db").exists(), "nothing was written to the SQLite file"

        async with nerve_slack(env) as again:
            url = again.events_url
            follow_up = mention(f"<@{BOT_USER_ID}> and tomorrow?", ts="1600000000.700200", thread_ts=root)
            assert await deliver(http, url, follow_up) == 200
            await slack.wait_for(lambda s: len(texts(s, root)) >= 2 and "Rain" in texts(s, root)[-1], 30)
            assert await again.stop() == 0, again.log()

    # The model saw the thread as PostgreSQL kept it across the restart: question, answer, question.
    assert user_texts(llm.requests[1]) == ["weather in 1010?", "and tomorrow?"]
    assistant = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant == ["Sunny in 1010."]

"""SIGTERM with a turn in flight on Discord: `nerve discord` as a real process against the local
Discord fake (REST and gateway) and a slow local model, with a real stdio MCP server under it.

`/readyz` answers 503 "shutting down" at once, the running turn's answer still goes out within
NERVE_SHUTDOWN_GRACE, a message that arrives meanwhile is kept for the next start, the process exits
0, and the MCP server does not outlive it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp

from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.test_deploy import gone
from tests.test_slack_shutdown import nerve_running, readiness, until


def discord_env(tmp_path: Path, fake: FakeDiscord, llm: FakeLLMServer, grace: float) -> dict[str, str]:
    servers = tmp_path / "mcp.json"
    env_query = {
        "command": sys.executable,
        "args": ["-m", "servers.env_query"],
        "cwd": str(ROOT),
        "trustAnnotations": True,
    }
    servers.write_text(json.dumps({"mcpServers": {"env-query": env_query}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_", "DISCORD_"))}
    env.update(
        NERVE_DB=str(tmp_path / "nerve.db"),
        NERVE_MCP_CONFIG=str(servers),
        DISCORD_BOT_TOKEN=fake.token,
        DISCORD_API_BASE_URL=fake.api_base_url,
        DISCORD_GATEWAY_URL=fake.gateway_url,
        NERVE_HTTP_HOST="127.0.0.1",
        NERVE_HTTP_PORT="0",
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key",
        NERVE_MODEL="test-model",
        NERVE_LOG_LEVEL="INFO",
        NERVE_SHUTDOWN_GRACE=f"{grace:g}",
    )
    return env


async def test_sigterm_on_discord_finishes_the_running_turn_keeps_new_messages_and_exits_0(
    tmp_path: Path,
) -> None:
    async with (
        FakeDiscord() as fake,
        FakeLLMServer([reply("the slow answer", delay=5.0)]) as llm,
        aiohttp.ClientSession() as http,
    ):
        async with nerve_running("discord", discord_env(tmp_path, fake, llm, grace=20)) as nerve:
            servers = await nerve.mcp_servers()
            # Ready: the gateway is past READY and the MCP server is up.
            for _ in range(300):
                if (await readiness(http, nerve.ops_url))[0] == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await readiness(http, nerve.ops_url))[0] == 200, nerve.log()

            user = fake.user("ada")
            await fake.user_says(user, "hi", mention_bot=True)
            await until(lambda: len(llm.requests) == 1, 30, "the model was never asked")

            nerve.process.send_signal(signal.SIGTERM)
            await nerve.wait_line(re.compile(r"stopping \(SIGTERM\)"), 10)
            status, ready = await readiness(http, nerve.ops_url)
            assert (status, ready["reasons"]) == (503, ["shutting down"])
            assert not any(m.get("content") == "the slow answer" for m in fake.bot_messages())

            later = await fake.user_says(user, "and this?", mention_bot=True)
            code = await nerve.exit_code(within=30)
        assert code == 0, nerve.log()
        assert [m["content"] for m in fake.bot_messages(fake.channel_id)] == ["the slow answer"]
        assert all(gone(pid) for pid in servers), "an MCP server outlived nerve"
        assert len(llm.requests) == 1
        store = await SQLiteStore.open(tmp_path / "nerve.db")
        try:
            kept = [event_id for event_id, _ in await store.unfinished_events("discord")]
        finally:
            await store.close()
        assert kept == [f"m:{later['id']}"], nerve.log()

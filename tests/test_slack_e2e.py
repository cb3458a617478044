"""The whole real path: fake Slack → bolt app → agent → real MCP stdio servers → reply in the thread."""

from __future__ import annotations

import json
from pathlib import Path

from bot.mcp.host import MCPHost
from tests.conftest import seed_servers
from tests.fakes.llm_server import reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import mention, rig, user_texts


async def test_a_mention_runs_a_real_mcp_tool_and_shows_its_result_in_the_thread(tmp_path: Path) -> None:
    script = [
        tool_reply(("get_environment_status", '{"area_code": "A1001"}')),
        reply("Air is fine in A1001."),
    ]
    async with MCPHost(seed_servers()) as host:
        await host.wait_until_ready()
        async with rig(tmp_path, script, host=host) as r:
            root = "1600000000.004000"
            await r.deliver(mention(f"<@{BOT_USER_ID}> air quality in A1001?", ts=root))
            await r.settle(within=30)
            [post] = r.slack.thread("C0CHANNEL", root)
            container, answer = post.current["blocks"]
            assert container["title"]["text"] == "get_environment_status · env-query"
            assert container["subtitle"]["text"].startswith("✅ ok")
            assert "A1001" in json.dumps(container["child_blocks"])
            assert answer["text"] == "Air is fine in A1001."
            tool_message = r.llm.requests[1]["messages"][-1]
            assert tool_message["role"] == "tool" and "A1001" in tool_message["content"]
            assert user_texts(r.llm.requests[0]) == ["air quality in A1001?"]

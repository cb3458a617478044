"""/readyz with a servers file that configures no MCP server: ready once the database and platform are."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.slack.serve import run_slack
from bot.mcp.host import MCPHost
from tests.fakes.slack_api import FakeSlack
from tests.test_ops_http import core, front_end, missing_server, readiness
from tests.test_slack_harness import settings_for as slack_settings


async def test_readyz_with_no_mcp_server_configured_is_ready_once_database_and_platform_are(
    tmp_path: Path,
) -> None:
    async with MCPHost({}) as host, core(tmp_path, host, []) as c, FakeSlack() as slack:
        ops_ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        run = run_slack(c.agent, slack_settings(slack), host="127.0.0.1", ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert await readiness(base) == (200, [])
            await c.store.close()
            assert await readiness(base) == (503, ["database unreachable: StoreError"])


async def test_readyz_with_servers_configured_and_none_ready_still_says_so(tmp_path: Path) -> None:
    async with MCPHost(missing_server()) as host, core(tmp_path, host, []) as c, FakeSlack() as slack:
        ops_ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        run = run_slack(c.agent, slack_settings(slack), host="127.0.0.1", ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert await readiness(base) == (503, ["no MCP server is ready (missing down)"])

"""An MCP server that will not stop (it ignores its stdin closing and SIGTERM) is killed within about a
second, so a SIGTERM'd nerve exits within NERVE_SHUTDOWN_GRACE plus a second and leaves no server.

Real processes: the server is `tests/mcp_servers/garbled.py` with GARBLED_STUBBORN=1, and `nerve
slack` runs as a child process. Elapsed times here have generous bounds for a busy machine; the
strict figure (grace + 1 s) is measured by `bench/faults_bench.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from bot.mcp.host import CLOSE_TIMEOUT, MCPHost
from bot.mcp.server_config import ServerConfig
from bot.mcp.stdio import EXIT_AFTER_EOF, EXIT_AFTER_TERM, KILL_REAP
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.test_deploy import gone
from tests.test_slack_harness import mention
from tests.test_slack_shutdown import deliver, nerve_slack, slack_env, until

# The SDK's own sequence waits 2 s after closing stdin and 2 s after SIGTERM: 4 s at least.
SDK_STOP = 4.0


def stubborn_entry(pid_file: Path) -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.garbled"],
        "cwd": str(ROOT),
        "env": {"GARBLED_STUBBORN": "1", "GARBLED_PID": str(pid_file)},
        "trustAnnotations": True,
    }


async def test_a_server_that_ignores_stdin_closing_and_sigterm_is_killed_within_about_a_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.mcp.stdio")
    pid_file = tmp_path / "pid"
    config = ServerConfig.model_validate(stubborn_entry(pid_file))
    async with asyncio.timeout(60):
        host = MCPHost({"stubborn": config})
        await host.start()
        assert host.server_states() == {"stubborn": True}
        pid = int(pid_file.read_text())
        started = time.monotonic()
        await host.aclose()
        took = time.monotonic() - started
    assert gone(pid), "the server outlived its host"
    # Killed by nerve's own sequence (about a second), not the SDK's (SDK_STOP at least)...
    assert [r.getMessage() for r in caplog.records if "terminating it" in r.getMessage()] == [
        f"MCP server 'stubborn' did not exit within {EXIT_AFTER_EOF:g} s of its input closing; terminating it"
    ]
    assert EXIT_AFTER_EOF + EXIT_AFTER_TERM + KILL_REAP < SDK_STOP - 1.0
    # ...and the host did not give up on it (CLOSE_TIMEOUT). Generous, so a busy machine passes;
    # the strict figure is `bench/stubborn_shutdown.py`'s.
    assert took < CLOSE_TIMEOUT, f"stopping took {took:.1f} s"


async def stopped_with_a_stubborn_server(
    folder: Path, grace: float, *, busy: bool = False
) -> tuple[float, int, int, str]:
    """`nerve slack` with a server that will not stop, SIGTERM'd once that server runs (with `busy`,
    while a turn runs that outlasts the grace): seconds from the signal to nerve's exit, its exit
    code, the server's process id, nerve's log."""
    pid_file = folder / "pid"
    servers = folder / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"stubborn": stubborn_entry(pid_file)}}))
    async with (
        FakeSlack() as slack,
        FakeLLMServer([reply("too late", delay=60.0)]) as llm,
        aiohttp.ClientSession() as http,
    ):
        env = slack_env(folder, slack, llm, NERVE_MCP_CONFIG=str(servers), NERVE_SHUTDOWN_GRACE=f"{grace:g}")
        async with nerve_slack(env) as nerve:
            await until(pid_file.exists, 60, "the MCP server never started")
            if busy:
                assert await deliver(http, nerve.events_url, mention(f"<@{BOT_USER_ID}> hi")) == 200
                await until(lambda: len(llm.requests) == 1, 30, "the model was never asked")
            started = time.monotonic()
            nerve.process.send_signal(signal.SIGTERM)
            code = await nerve.exit_code(within=60)
            return time.monotonic() - started, code, int(pid_file.read_text()), nerve.log()


async def test_sigterm_with_a_stubborn_server_and_a_turn_past_the_grace_exits_and_leaves_no_server(
    tmp_path: Path,
) -> None:
    grace = 1.0
    took, code, pid, log = await stopped_with_a_stubborn_server(tmp_path, grace, busy=True)
    assert code == 0, log
    assert gone(pid), "the MCP server outlived nerve"
    assert took < grace + 8, f"exited {took:.1f} s after SIGTERM with a {grace:g} s grace"
    assert "Traceback" not in log

"""Stdio servers started before nerve loads its libraries (`bot.mcp.early_start`): a link connects
to the process started for it instead of spawning a second one; one started otherwise, or never
claimed, is stopped. Real processes throughout: `tests/mcp_servers/garbled.py` writes its process
id to GARBLED_PID, and the command-line test runs `nerve ask` as a child process."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bot.mcp import early_start
from bot.mcp.early_start import started_early
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from tests.conftest import ROOT
from tests.test_cli import nerve_env, run_nerve
from tests.test_deploy import gone
from tests.test_slack_shutdown import until


def recorded(pid_file: Path, **env: str) -> ServerConfig:
    """A server that writes its process id to `pid_file` when it starts."""
    return ServerConfig.model_validate(
        {
            "command": sys.executable,
            "args": ["-m", "tests.mcp_servers.garbled"],
            "cwd": str(ROOT),
            "env": {"GARBLED_PID": str(pid_file), **env},
        }
    )


async def written(pid_file: Path) -> int:
    """The process id the server wrote, once it has."""
    await until(lambda: pid_file.exists() and bool(pid_file.read_text()), 60, "the server never started")
    return int(await asyncio.to_thread(pid_file.read_text))


async def test_the_link_connects_to_the_process_started_early_and_stops_it_with_the_host(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    config = recorded(pid_file)
    async with asyncio.timeout(60), started_early({"early": config}):
        early_pid = await written(pid_file)
        pid_file.write_text("")  # a second start would write its own id here
        async with MCPHost({"early": config}) as host:
            assert host.server_states() == {"early": True}
            assert pid_file.read_text() == "", "the host started a second process"
        assert gone(early_pid), "the process outlived its host"
    assert early_start._waiting == {}


async def test_a_process_started_from_another_entry_is_stopped_and_the_link_starts_its_own(
    tmp_path: Path,
) -> None:
    early_file, own_file = tmp_path / "early", tmp_path / "own"
    async with asyncio.timeout(60), started_early({"s": recorded(early_file)}):
        early_pid = await written(early_file)
        async with MCPHost({"s": recorded(own_file)}) as host:
            assert host.server_states() == {"s": True}
            own_pid = await written(own_file)
            assert own_pid != early_pid
            assert gone(early_pid), "the process started from the old entry was left running"


async def test_a_process_no_link_claims_is_stopped_when_the_command_ends(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    async with asyncio.timeout(60):
        async with started_early({"unused": recorded(pid_file, GARBLED_STUBBORN="1")}):
            pid = await written(pid_file)
        assert gone(pid), "an unclaimed server was left running"
        assert early_start._waiting == {}


async def test_nerve_ask_connects_to_each_server_it_started_early_and_starts_none_twice(
    tmp_path: Path,
) -> None:
    spawns = tmp_path / "spawns"
    # Each start appends a line, then runs the seed server as `python -m` would.
    counted = (
        "import os, runpy, sys; "
        "open(os.environ['SPAWNS'], 'a').write(sys.argv[1] + '\\n'); "
        "runpy.run_module(sys.argv[1], run_name='__main__', alter_sys=True)"
    )
    seed = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]
    servers = {
        name: {
            **entry,
            "command": sys.executable,
            "args": ["-c", counted, entry["args"][1]],
            "cwd": str(ROOT),
            "env": {"SPAWNS": str(spawns)},
        }
        for name, entry in seed.items()
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    env = nerve_env(tmp_path, NERVE_MCP_CONFIG=str(config), NERVE_MODEL="offline", NERVE_LOG_LEVEL="DEBUG")
    code, out, err = await run_nerve("ask", "What is the air quality in A1001?", env=env)
    assert code == 0, err
    assert "AQI" in out
    assert sorted(spawns.read_text().split()) == ["servers.env_query", "servers.geo_simulator"]
    for name in seed:
        assert f"MCP server {name!r}: connecting to the process started early" in err

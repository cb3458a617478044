"""The MCP host over a server's life: starting in the background, crashing, restarting, its stderr."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.agent import Agent
from bot.mcp.host import MCPHost
from bot.mcp.link import BACKOFF_FIRST
from bot.mcp.server_config import ServerConfig
from bot.types import ConversationKey, Incoming, ToolResult
from tests.fakes.scripted import ScriptedLLM, Step

ROOT = Path(__file__).resolve().parents[1]
SECRET = "FATAL: login failed for api_key=sk-live-7Hq2Zr9Xw"


def stdio(module: str, **kwargs: Any) -> ServerConfig:
    env = kwargs.pop("env", {})
    return ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", module], cwd=str(ROOT), env=env, **kwargs
    )


def flaky(state: Path, *, fail_starts: int = 0, **kwargs: Any) -> ServerConfig:
    env = {"FLAKY_STATE": str(state), "FLAKY_SECRET": SECRET, "FLAKY_FAIL_STARTS": str(fail_starts)}
    return stdio("tests.mcp_servers.flaky", env=env, **kwargs)


def hanging() -> ServerConfig:
    """Starts and never says a word (it exits when its stdin closes)."""
    return ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-c", "import sys; sys.stdin.read()"]
    )


def retry_waits(caplog: pytest.LogCaptureFixture, server: str) -> list[float]:
    """The backoff waits the host chose for a server, from its log lines, in order."""
    return [
        float(record.args[2])  # type: ignore[index]
        for record in caplog.records
        if record.name == "bot.mcp.link" and "retrying in" in record.msg and record.args[0] == server  # type: ignore[index]
    ]


# --- stderr ---------------------------------------------------------------------------------------


async def test_a_server_s_stderr_goes_to_its_log_and_never_into_a_tool_result(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bot.mcp.stderr")
    seen: list[ToolResult] = []
    async with asyncio.timeout(60), MCPHost({"flaky": flaky(tmp_path, timeout=3)}) as host:
        seen.append(await host.call_tool("crash_and_stay_down", {}))
        # The restart fails too (the server now exits at start-up, printing the secret again).
        await host.wait_for(lambda: "lost the connection" not in dict(host.problems()).get("flaky", "lost"))
        seen.append(await host.call_tool("echo", {"text": "anyone there?"}))
        problems = dict(host.problems())

    assert [result.error_kind for result in seen] == ["unavailable", "unavailable"]
    assert not [result for result in seen if SECRET in result.content or "api_key" in result.content]
    assert SECRET not in problems["flaky"] and "see the log" in problems["flaky"]
    logged = [r for r in caplog.records if r.name == "bot.mcp.stderr.flaky" and r.getMessage() == SECRET]
    assert logged, "the server's stderr line must reach the log under the server's own logger"


# --- restarts -------------------------------------------------------------------------------------


async def test_a_call_that_arrives_while_its_server_restarts_waits_and_then_succeeds(tmp_path):
    async with asyncio.timeout(60), MCPHost({"flaky": flaky(tmp_path)}) as host:
        crashed = await host.call_tool("crash", {})
        assert crashed.error_kind == "unavailable"
        assert [name for name, _ in host.problems()] == ["flaky"]  # restarting right now
        again = await host.call_tool("echo", {"text": "back"})
        assert again.structured == {"result": "back"}
        assert host.problems() == []


async def test_a_call_during_a_restart_that_does_not_come_back_in_time_says_so(tmp_path):
    async with asyncio.timeout(60), MCPHost({"flaky": flaky(tmp_path, timeout=1)}) as host:
        await host.call_tool("crash_and_stay_down", {})
        result = await host.call_tool("echo", {"text": "hello"})
    assert result.error_kind == "unavailable"
    assert "flaky" in result.content and "restart" in result.content


async def test_the_backoff_starts_again_from_the_first_step_after_a_successful_call(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="bot.mcp.link")
    async with asyncio.timeout(60), MCPHost({"flaky": flaky(tmp_path, fail_starts=1)}) as host:
        await host.wait_until_ready()  # after one failed start: the next failure would wait twice as long
        assert (await host.call_tool("echo", {"text": "ok"})).structured == {"result": "ok"}
        await host.call_tool("crash", {})
        await host.wait_until_ready()
    first, after_crash = retry_waits(caplog, "flaky")
    assert first <= BACKOFF_FIRST * 1.2
    assert after_crash <= BACKOFF_FIRST * 1.2, "a successful call proves the server healthy again"


# --- start-up -------------------------------------------------------------------------------------


async def test_start_returns_while_a_server_hangs_and_the_ready_servers_answer_meanwhile():
    servers = {
        "env-query": stdio("servers.env_query"),
        "geo-simulator": stdio("servers.geo_simulator"),
        "stuck": hanging(),
    }
    host = MCPHost(servers, connect_timeout=120)
    try:
        async with asyncio.timeout(60):
            await host.start()
            assert host.starting() == ["stuck"]
            assert ("stuck", "still starting") in host.problems()
            await host.wait_for(lambda: len(host.list_tools()) == 2)
            result = await host.call_tool("get_environment_status", {"area_code": "A1001"})
            assert not result.is_error
            assert host.starting() == ["stuck"]  # answered while the hanging one still had not
    finally:
        await host.aclose()


async def test_start_waits_for_servers_that_come_up_together():
    async with asyncio.timeout(60), MCPHost({"env-query": stdio("servers.env_query")}) as host:
        assert host.starting() == []
        assert [spec.name for spec in host.list_tools()] == ["get_environment_status"]


async def test_an_answer_given_while_a_server_is_still_starting_says_so(store):
    host = MCPHost({"env-query": stdio("servers.env_query"), "stuck": hanging()}, connect_timeout=120)
    try:
        async with asyncio.timeout(60):
            await host.start()
            await host.wait_for(lambda: len(host.list_tools()) == 1)
            llm = ScriptedLLM([Step(text="Hello!")])
            agent = Agent(llm=llm, host=host, store=store, inbox=store)
            key = ConversationKey(platform="test", workspace="w", channel="c", thread="t")
            reply = await agent.reply(Incoming(key=key, text="hello", user_id="u1"))
    finally:
        await host.aclose()
    assert [tool.name for tool in llm.tools_seen[0]] == ["get_environment_status"]
    assert reply.text.startswith("Hello!")
    assert "stuck" in reply.text and "still starting" in reply.text

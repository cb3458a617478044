"""A stdio server whose output cannot be read as it is: bytes that are not UTF-8, a lone surrogate,
a line that is not JSON. Each call is answered at once (read with replacement characters, or failed
with an error saying the answer could not be read), the next call to the server works, and the log
has one WARNING naming the server, without a traceback.

A real server as a subprocess (`tests/mcp_servers/garbled.py`); the call timeout is only a bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.mcp.stdio import LineReader
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.test_cli import nerve_env, run_nerve, servers_file

ROOT = Path(__file__).resolve().parents[1]
# Far longer than an answer takes, far shorter than the time a wedged call would wait.
CALL_TIMEOUT = 20.0
# A call timeout far past the test's own give-up (60 s): a call it ends fails the test.
LONG = 600.0


def garbled() -> ServerConfig:
    return ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.garbled"], cwd=str(ROOT)
    )


def warnings_about(caplog: pytest.LogCaptureFixture, server: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and f"{server!r}" in r.getMessage()]


@pytest.mark.parametrize(
    ("kind", "shown", "said"),
    [
        ("bytes", "caf\ufffd ok", "is not valid UTF-8"),
        ("surrogate", "a\ufffdb ok", "holds lone surrogates"),
        ("noise", "after noise", "is not valid UTF-8 and is not JSON"),
    ],
)
async def test_a_line_that_is_not_clean_text_is_read_with_replacement_characters(
    kind: str, shown: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with asyncio.timeout(60), MCPHost({"garbled": garbled()}, default_timeout=CALL_TIMEOUT) as host:
        result = await host.call_tool("garble", {"kind": kind})
        assert not result.is_error, result.content
        assert shown in result.content
        again = await host.call_tool("echo", {"text": "still here"})
        assert not again.is_error and "still here" in again.content
    warned = warnings_about(caplog, "garbled")
    assert [r.name for r in warned] == ["bot.mcp.stdio"], [r.getMessage() for r in warned]
    assert said in warned[0].getMessage()
    assert warned[0].exc_info is None
    assert not [r for r in caplog.records if r.name.startswith("mcp.client")]


async def test_an_answer_that_is_not_json_fails_its_call_at_once_and_the_next_call_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with asyncio.timeout(60), MCPHost({"garbled": garbled()}, default_timeout=LONG) as host:
        started = time.monotonic()
        result = await host.call_tool("garble", {"kind": "broken"})
        took = time.monotonic() - started
        assert result.is_error and result.error_kind != "timeout", result.content
        assert "could not be read" in result.content and "is not JSON" in result.content
        assert took < LONG / 10  # answered when the line came, not when the timeout ran out
        again = await host.call_tool("echo", {"text": "still here"})
        assert not again.is_error and "still here" in again.content
    warned = warnings_about(caplog, "garbled")
    assert len(warned) == 1 and "failed at once" in warned[0].getMessage()
    assert warned[0].exc_info is None
    assert not [r for r in caplog.records if r.name.startswith("mcp.client")]


def test_warnings_about_one_server_are_throttled(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    reader = LineReader("noisy")
    for _ in range(1000):
        assert reader.read(b"\xff garbage " * 100) is None
    warned = warnings_about(caplog, "noisy")
    assert len(warned) == 1
    assert len(warned[0].getMessage()) < 400  # quotes the start of the line, never all of it


def test_a_lone_surrogate_in_a_key_or_list_is_replaced_too() -> None:
    reader = LineReader("keys")
    line = b'{"jsonrpc": "2.0", "id": 1, "result": {"k\\udc00": ["\\ud800", "\\ud83d\\ude00"]}}'
    message = reader.read(line)
    assert message is not None
    assert message.message.model_dump()["result"] == {"k\ufffd": ["\ufffd", "\U0001f600"]}


async def test_nerve_ask_shows_one_line_naming_the_server_and_no_traceback(tmp_path: Path) -> None:
    entry = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.garbled"], "cwd": str(ROOT)}
    config = servers_file(tmp_path, {"garbled": {**entry, "trustAnnotations": True}})
    script = [
        tool_reply(FakeCall(name="garble", arguments=json.dumps({"kind": "broken"}), id="c1")),
        tool_reply(FakeCall(name="echo", arguments=json.dumps({"text": "still here"}), id="c2")),
        reply("done"),
    ]
    async with FakeLLMServer(script) as model:
        env = nerve_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=str(config))
        code, out, err = await run_nerve("ask", "--json", "garble it", env=env)
        model.assert_complete()
    assert code == 0, err
    calls = json.loads(out)["tool_calls"]
    assert [c["is_error"] for c in calls] == [True, False], calls
    assert "Traceback" not in err and "mcp.client" not in err, err
    named = [line for line in err.splitlines() if "'garbled'" in line]
    assert len(named) == 1 and "is not JSON" in named[0], err

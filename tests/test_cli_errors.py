"""`nerve`'s own mistakes and interruptions as a user meets them: one line, the right exit code."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.fakes.llm_server import FakeLLMServer, Reply, reply
from tests.test_cli import nerve_env, run_nerve, servers_file, shipped_servers

DIRECTORY_ERROR = "is a directory, not a file (set NERVE_MCP_CONFIG to the servers file)"


async def test_a_port_out_of_range_is_a_bad_setting_in_one_line(tmp_path: Path) -> None:
    code, out, err = await run_nerve("tools", env=nerve_env(tmp_path, NERVE_HTTP_PORT="99999"))
    assert code == 2 and out == ""
    assert err.startswith("nerve: bad setting: NERVE_HTTP_PORT:") and err.count("\n") == 1


async def test_a_servers_file_that_is_a_directory_is_named_as_one(tmp_path: Path) -> None:
    code, out, err = await run_nerve("tools", env=nerve_env(tmp_path, NERVE_MCP_CONFIG=str(tmp_path)))
    assert code == 2 and out == ""
    assert err == f"nerve: {tmp_path}: {DIRECTORY_ERROR}\n"


async def test_tools_with_no_server_available_exits_1(tmp_path: Path) -> None:
    config = servers_file(tmp_path, {"gone": {"command": str(tmp_path / "no-such-server")}})
    env = nerve_env(tmp_path, NERVE_MCP_CONFIG=str(config))

    code, out, err = await run_nerve("tools", env=env)
    assert code == 1, (out, err)
    assert "gone is not available" in out

    code, out, err = await run_nerve("tools", "--json", env=env)
    # Only nerve's own memory, schedule and file tools, which no server provides.
    assert code == 1 and [t["function"]["name"] for t in json.loads(out)] == [
        "remember",
        "recall",
        "forget",
        "schedule",
        "list_schedules",
        "cancel_schedule",
        "read_attachment",
        "search_attachment",
    ]


async def test_tools_with_no_server_configured_is_not_a_failure(tmp_path: Path) -> None:
    config = servers_file(tmp_path, {})
    code, out, err = await run_nerve("tools", env=nerve_env(tmp_path, NERVE_MCP_CONFIG=str(config)))
    assert code == 0, err
    # The line wraps at the console's width wherever the temporary path ends: read it unwrapped.
    assert "configures no MCP servers" in " ".join(out.split())


async def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    code, out, err = await run_nerve("--version", env=nerve_env(tmp_path))
    assert code == 0, err
    assert out == f"nerve {version('nerve')}\n"


async def test_every_command_with_thread_documents_it_in_its_help(tmp_path: Path) -> None:
    for command in ("chat", "ask", "history"):
        code, out, err = await run_nerve(command, "--help", env=nerve_env(tmp_path))
        assert code == 0, err
        line = next(line for line in out.splitlines() if line.strip().startswith("--thread"))
        assert "conversation" in line, (command, out)


async def test_ctrl_c_mid_answer_ends_the_line_and_says_cancelled(tmp_path: Path) -> None:
    await _ctrl_c_mid_answer(tmp_path)


async def test_ctrl_c_mid_answer_cancels_also_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A parent that ignores SIGINT (a test runner's worker, a job started in the background) hands
    that on to its children, and Python then never installs its Ctrl-C handler: the turn must take
    Ctrl-C itself."""
    await _ctrl_c_mid_answer(tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


async def _ctrl_c_mid_answer(tmp_path: Path, preexec_fn: Callable[[], object] | None = None) -> None:
    asked = asyncio.Event()

    def responder(body: dict[str, Any]) -> Reply:
        asked.set()
        return reply("The air in A1001 is", stall_after=3, stall=60)

    async with FakeLLMServer(responder) as model:
        # One server to stop on the interruption, the one the question is about.
        env = nerve_env(
            tmp_path,
            servers=shipped_servers("env-query"),
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY="test",
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "ask",
            "How is the air in A1001?",
            env=env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=preexec_fn,
        )
        await asyncio.wait_for(asked.wait(), 60)
        assert process.stdout is not None
        # The first words are out (the rest stalls): interrupted mid-answer, whatever the machine's pace.
        first = await asyncio.wait_for(process.stdout.readuntil(b"The air"), 60)
        process.send_signal(signal.SIGINT)
        try:
            rest, err = await asyncio.wait_for(process.communicate(), 30)
        except TimeoutError:
            process.kill()
            _, err = await process.communicate()
            pytest.fail(f"nerve did not end within 30 s of Ctrl-C; what it logged:\n{err.decode()[-4000:]}")
        out = first + rest

    assert process.returncode == 130
    assert out.decode().startswith("The air")
    assert err.decode().endswith("\nnerve: cancelled\n")
    assert "Traceback" not in err.decode()

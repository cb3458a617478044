"""SIGTERM with turns in flight: `nerve slack` as a real process (HTTP mode) against the local Slack
fake and a slow local model, with a real stdio MCP server under it.

What must hold: intake stops at once (`/readyz` 503 "shutting down", a new delivery is acked and
kept for the next start), a turn that ends within NERVE_SHUTDOWN_GRACE is answered, one that does
not is cut off (its live message says so) and answered exactly once at the next start, the process
exits 0 within the grace and a few seconds, and no MCP server process outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from adapters.slack.turns import CUT_OFF_BY_RESTART
from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.ports import unused_port
from tests.test_cli import nerve_env
from tests.test_deploy import children_of, gone
from tests.test_slack_harness import mention, sign, user_texts

CHANNEL = "C0CHANNEL"
EVENTS = re.compile(r"serving Slack events and interactions at (\S+)")
OPS = re.compile(r"serving /healthz, /readyz and /metrics at (\S+)")


def shutdown_env(tmp_path: Path, slack: FakeSlack, llm: FakeLLMServer, grace: float) -> dict[str, str]:
    servers = tmp_path / "mcp.json"
    env_query = {
        "command": sys.executable,
        "args": ["-m", "servers.env_query"],
        "cwd": str(ROOT),
        "trustAnnotations": True,
    }
    servers.write_text(json.dumps({"mcpServers": {"env-query": env_query}}))
    return slack_env(tmp_path, slack, llm, NERVE_MCP_CONFIG=str(servers), NERVE_SHUTDOWN_GRACE=f"{grace:g}")


def slack_env(tmp_path: Path, slack: FakeSlack, llm: FakeLLMServer, **overrides: str) -> dict[str, str]:
    """The environment of a `nerve slack` child process over HTTP against the fake Slack and model."""
    env = nerve_env(
        tmp_path,
        SLACK_BOT_TOKEN="xoxb-test-token",
        SLACK_SIGNING_SECRET="test-signing-secret",
        SLACK_API_BASE_URL=slack.api_url,
        NERVE_HTTP_HOST="127.0.0.1",
        NERVE_HTTP_PORT=str(unused_port()),
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key",
        NERVE_MODEL="test-model",
        NERVE_LOG_LEVEL="INFO",
        **overrides,
    )
    env.pop("SLACK_APP_TOKEN", None)
    return env


class Nerve:
    """`python -m bot slack` as a child process, its log read as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())
        self.events_url = ""
        self.ops_url = ""

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            async with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("<exited>")
            self._changed.notify_all()

    def log(self) -> str:
        return "".join(self.lines)

    async def wait_line(self, pattern: re.Pattern[str], within: float = 60.0) -> re.Match[str]:
        def seen() -> bool:
            return "<exited>" in self.lines or any(pattern.search(line) for line in self.lines)

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(seen)
        except TimeoutError:
            raise AssertionError(f"no log line like {pattern.pattern!r}:\n{self.log()}") from None
        for line in self.lines:
            if found := pattern.search(line):
                return found
        raise AssertionError(f"nerve exited before {pattern.pattern!r}:\n{self.log()}")

    async def mcp_servers(self) -> set[int]:
        """The MCP server processes under nerve, once they have started."""
        for _ in range(600):
            found = children_of(self.process.pid)
            if found:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(f"the MCP server never started:\n{self.log()}")

    async def stop(self, within: float = 40.0) -> int:
        """SIGTERM, then its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return await self.exit_code(within)

    async def exit_code(self, within: float) -> int:
        try:
            async with asyncio.timeout(within):
                code = await self.process.wait()
        except TimeoutError:
            raise AssertionError(f"nerve still ran {within:g} s after SIGTERM:\n{self.log()}") from None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._reader, 10)
        return code


@contextlib.asynccontextmanager
async def nerve_running(command: str, env: dict[str, str]) -> AsyncIterator[Nerve]:
    """`nerve COMMAND` until its /healthz, /readyz and /metrics are served; killed if still running
    at the end (a test that meant it to stop has waited for its exit code already)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        command,
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    nerve = Nerve(process)
    try:
        nerve.ops_url = (await nerve.wait_line(OPS)).group(1)
        yield nerve
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def nerve_slack(env: dict[str, str]) -> AsyncIterator[Nerve]:
    async with nerve_running("slack", env) as nerve:
        nerve.events_url = (await nerve.wait_line(EVENTS)).group(1)
        yield nerve


async def deliver(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    raw = json.dumps(body)
    async with http.post(url, data=raw, headers=sign(raw)) as response:
        await response.read()
        return response.status


async def readiness(http: aiohttp.ClientSession, ops_url: str) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{ops_url}/readyz") as response:
        return response.status, await response.json()


async def until(check: Callable[[], bool], within: float, what: str) -> None:
    """Poll `check` (state of another process, or of a fake without a condition for it)."""
    for _ in range(int(within / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(what)


async def unfinished(tmp_path: Path) -> list[str]:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        return [event_id for event_id, _ in await store.unfinished_events("slack")]
    finally:
        await store.close()


def texts(slack: FakeSlack, root: str) -> list[str]:
    return [p.text for p in slack.thread(CHANNEL, root)]


async def test_sigterm_stops_intake_at_once_lets_the_running_turn_finish_and_leaves_no_mcp_server(
    tmp_path: Path,
) -> None:
    root, later = "1600000000.500100", "1600000000.500200"
    async with (
        FakeSlack() as slack,
        FakeLLMServer([reply("the slow answer", delay=5.0)]) as llm,
        aiohttp.ClientSession() as http,
    ):
        async with nerve_slack(shutdown_env(tmp_path, slack, llm, grace=20)) as nerve:
            servers = await nerve.mcp_servers()
            assert await deliver(http, nerve.events_url, mention(f"<@{BOT_USER_ID}> hi", ts=root)) == 200
            await until(lambda: len(llm.requests) == 1, 30, "the model was never asked")

            nerve.process.send_signal(signal.SIGTERM)
            await nerve.wait_line(re.compile(r"stopping \(SIGTERM\)"), 10)
            status, ready = await readiness(http, nerve.ops_url)
            assert (status, ready["reasons"]) == (503, ["shutting down"])
            assert texts(slack, root) in ([], ["Thinking…"]), "the turn should still be running"

            # Intake has stopped: a new mention is acked, kept for the next start, not answered now.
            kept = mention(f"<@{BOT_USER_ID}> and this?", ts=later)
            assert await deliver(http, nerve.events_url, kept) == 200

            code = await nerve.exit_code(within=30)
        assert code == 0, nerve.log()
        assert texts(slack, root) == ["the slow answer"]
        assert slack.calls_of("reactions.add") and slack.reacted(CHANNEL, root) == set()
        assert all(gone(pid) for pid in servers), "an MCP server outlived nerve"
        assert slack.thread(CHANNEL, later) == [] and len(llm.requests) == 1
        assert await unfinished(tmp_path) == [kept["event_id"]]


async def test_a_turn_longer_than_the_grace_is_cut_off_then_answered_once_at_the_next_start(
    tmp_path: Path,
) -> None:
    root, grace = "1600000000.500300", 1.0
    script = [reply("too late", delay=60.0), reply("answered after the restart")]
    async with FakeSlack() as slack, FakeLLMServer(script) as llm, aiohttp.ClientSession() as http:
        env = shutdown_env(tmp_path, slack, llm, grace=grace)
        body = mention(f"<@{BOT_USER_ID}> what is the weather?", ts=root)
        async with nerve_slack(env) as nerve:
            servers = await nerve.mcp_servers()
            assert await deliver(http, nerve.events_url, body) == 200
            await until(lambda: len(llm.requests) == 1, 30, "the model was never asked")
            await slack.wait_for(lambda s: texts(s, root) == ["Thinking…"], 10)

            signalled = time.monotonic()
            nerve.process.send_signal(signal.SIGTERM)
            code = await nerve.exit_code(within=grace + 20)
            took = time.monotonic() - signalled
        assert code == 0, nerve.log()
        assert took < grace + 8, f"exited {took:.1f} s after SIGTERM with a {grace:g} s grace"
        assert all(gone(pid) for pid in servers), "an MCP server outlived nerve"
        # The thread stays readable: the live message says what happened instead of "Thinking…".
        assert texts(slack, root) == [CUT_OFF_BY_RESTART]
        assert slack.reacted(CHANNEL, root) == {"eyes"}
        assert await unfinished(tmp_path) == [body["event_id"]]

        live = slack.thread(CHANNEL, root)[0].ts
        async with nerve_slack(env) as again:
            await slack.wait_for(lambda s: texts(s, root) == ["answered after the restart"], 60)
            await slack.wait_for(lambda s: s.reacted(CHANNEL, root) == set(), 10)
            again.process.send_signal(signal.SIGTERM)
            assert await again.exit_code(within=30) == 0, again.log()
        # The answer replaced the note in the same message: the thread reads as one answer.
        assert [p.ts for p in slack.thread(CHANNEL, root)] == [live]
        assert texts(slack, root) == ["answered after the restart"]
        assert len(llm.requests) == 2
        assert user_texts(llm.requests[1]) == ["what is the weather?"]  # the question once, not twice
        assert await unfinished(tmp_path) == []

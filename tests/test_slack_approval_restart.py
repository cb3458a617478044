"""Approvals on Slack across processes and transports: a click after the bot was killed and started
again, a click over Socket Mode, and what `run_slack` does with parked turns at start-up.

The restart test runs `python -m bot slack` in HTTP mode as a real process, kills it with SIGKILL
between the approval message and the click, starts it again on the same database, and clicks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import aiohttp

from adapters.slack.serve import run_slack
from bot.agent import AgentConfig
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.test_slack_approvals import (
    ALICE,
    CHANNEL,
    button,
    buttons,
    click_payload,
    host,  # noqa: F401  (fixture)
    notes,  # noqa: F401  (fixture)
    ran,
    read_and_add,
)
from tests.test_slack_harness import core, mention, settings_for, sign
from tests.test_slack_runner import running
from tests.test_slack_shutdown import slack_env

READY = re.compile(r"serving Slack events and interactions at (\S+)")


class NerveProcess:
    """`python -m bot slack` as a child process, its log read line by line as it comes."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> str:
        """Start it and wait until it serves; returns the events URL."""
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "slack",
            env=self._env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())
        line = await self.wait_line(READY)
        found = READY.search(line)
        assert found is not None
        return found.group(1)

    async def _read(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        async for raw in self._process.stderr:
            async with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        async with self._changed:
            self.lines.append("<exited>")
            self._changed.notify_all()

    async def wait_line(self, pattern: re.Pattern[str], within: float = 60.0) -> str:
        def found() -> bool:
            return any(pattern.search(line) for line in self.lines) or "<exited>" in self.lines

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(found)
        except TimeoutError:
            raise AssertionError(f"no log line like {pattern.pattern!r}:\n{''.join(self.lines)}") from None
        matching = [line for line in self.lines if pattern.search(line)]
        assert matching, f"nerve exited before {pattern.pattern!r}:\n{''.join(self.lines)}"
        return matching[0]

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when the machine or the container dies."""
        if self._process is not None and self._process.returncode is None:
            self._process.send_signal(signal.SIGKILL)
            await asyncio.wait_for(self._process.wait(), 30)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._reader, 10)


@contextlib.asynccontextmanager
async def nerve_slack(env: dict[str, str]) -> AsyncIterator[tuple[NerveProcess, str]]:
    process = NerveProcess(env)
    try:
        url = await process.start()
        yield process, url
    finally:
        await process.kill()


async def post_signed(http: aiohttp.ClientSession, url: str, raw: str, content_type: str) -> int:
    headers = sign(raw)
    headers["Content-Type"] = content_type
    async with http.post(url, data=raw, headers=headers) as response:
        await response.read()
        return response.status


async def test_a_click_after_the_bot_was_killed_and_started_again_gets_the_answer(tmp_path, notes):  # noqa: F811
    servers = tmp_path / "mcp.json"
    trust = {
        "command": "python",
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.trust"],
        "cwd": str(ROOT),
        "env": {"TRUST_NOTES": str(notes), "TRUST_LOG": str(notes.with_suffix(".log"))},
    }
    servers.write_text(json.dumps({"mcpServers": {"notes": trust}}))
    root = "1600000000.200100"
    async with (
        FakeSlack() as slack,
        FakeLLMServer([read_and_add(), reply("Added it after the restart.")]) as llm,
        aiohttp.ClientSession() as http,
    ):
        env = slack_env(tmp_path, slack, llm, NERVE_MCP_CONFIG=str(servers))
        body = mention(f"<@{BOT_USER_ID}> add hi to the note", ts=root)
        async with nerve_slack(env) as (first, url):
            assert await post_signed(http, url, json.dumps(body), "application/json") == 200
            await first.wait_line(re.compile(rf"finished Slack event {body['event_id']}"))
        assert ran(notes) == ["read_note"]
        [approval] = [p for p in slack.thread(CHANNEL, root) if buttons(p)]

        async with nerve_slack(env) as (_, url):
            payload = click_payload(approval, button(approval, "approve", 0), ALICE)
            raw = urlencode({"payload": json.dumps(payload)})
            assert await post_signed(http, url, raw, "application/x-www-form-urlencoded") == 200
            await slack.wait_for(
                lambda s: s.thread(CHANNEL, root)[-1].text == "Added it after the restart.", 60
            )
            await slack.wait_for(lambda _s: not buttons(approval), 10)

        assert notes.read_text(encoding="utf-8") == "first line\nhi\n"
        assert ran(notes) == ["read_note", "append_note"]
        assert (
            len([p for p in slack.thread(CHANNEL, root) if "nerve_approval" in json.dumps(p.versions[0])])
            == 1
        )
        assert slack.calls_of("chat.postEphemeral") == []


async def test_a_click_over_socket_mode_is_acked_and_decides(tmp_path, host, notes):  # noqa: F811
    async with core(tmp_path, [read_and_add(), reply("Added it.")], host=host, approvals=True) as c:
        settings = settings_for(c.slack, slack_app_token="xapp-test", slack_signing_secret=None)
        async with running(c.agent, settings):
            root = "1600000000.200200"
            body = mention(f"<@{BOT_USER_ID}> add hi", ts=root)
            await c.slack.send_envelope(body)
            await c.inbox.wait_finished(body["event_id"])
            [approval] = [p for p in c.slack.thread(CHANNEL, root) if buttons(p)]

            payload = click_payload(approval, button(approval, "approve", 0), ALICE)
            envelope_id = await c.slack.send_envelope(payload, kind="interactive")
            await c.slack.wait_for(lambda s: envelope_id in {a.get("envelope_id") for a in s.acks})
            await c.slack.wait_for(lambda s: s.thread(CHANNEL, root)[-1].text == "Added it.")
        assert notes.read_text(encoding="utf-8") == "first line\nhi\n"
        assert not buttons(approval)


async def test_run_slack_sweeps_expired_requests_and_a_late_click_is_told_so(tmp_path, host, notes):  # noqa: F811
    clock = Clock(1_900_000_000.0)
    steps = [read_and_add(), reply("Nobody approved it in time.")]
    config = AgentConfig(approval_timeout=60)
    async with core(tmp_path, steps, host=host, approvals=True, clock=clock, config=config) as c:
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            run_slack(c.agent, settings_for(c.slack), host="127.0.0.1", ready=ready, sweep_interval=0.05)
        )
        try:
            async with asyncio.timeout(10):
                url = await ready
            root = "1600000000.200300"
            body = mention(f"<@{BOT_USER_ID}> add hi", ts=root)
            async with aiohttp.ClientSession() as http:
                assert await post_signed(http, url, json.dumps(body), "application/json") == 200
                await c.inbox.wait_finished(body["event_id"])
                [approval] = [p for p in c.slack.thread(CHANNEL, root) if buttons(p)]
                shown = button(approval, "approve", 0)
                clock.now += 61
                await c.slack.wait_for(
                    lambda s: s.thread(CHANNEL, root)[-1].text == "Nobody approved it in time."
                )
                assert "Expired — not approved in time" in json.dumps(approval.current, ensure_ascii=False)
                assert not buttons(approval)

                # A click on the button as it was shown before the message was updated.
                raw = urlencode({"payload": json.dumps(click_payload(approval, shown, ALICE))})
                assert await post_signed(http, url, raw, "application/x-www-form-urlencoded") == 200
                await c.slack.wait_for(lambda s: bool(s.calls_of("chat.postEphemeral")))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        [note] = c.slack.calls_of("chat.postEphemeral")
        assert note.body["user"] == ALICE and "nothing changed" in note.body["text"]
        assert ran(notes) == ["read_note"]
        assert len(c.llm.requests) == 2

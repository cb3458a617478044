"""No secret nerve holds shows up anywhere it should not: logs, database, replies, metrics, MCP traffic.

A realistic session, as processes: `nerve slack` over HTTP (JSON logs, DEBUG), a person signs in to
the notes server (its own OAuth authorization server, a subprocess that writes down every request it
gets) and asks who they are, then asks something the model answers by echoing everything it was
sent, into a tool call to the recorder server (stdio, writes down its environment and every call)
and into the reply. Then `nerve slack` again on the same database, in Socket Mode (text logs,
DEBUG), answering with the sign-in kept from the first run. `/metrics` is scraped in both runs.

The secrets: the Slack bot token (`xoxb-`), app token (`xapp-`) and signing secret, the model key
(`sk-`), a Discord bot token, `NERVE_SECRET_KEY`, and the OAuth tokens the sign-in produced. Each is
searched for, verbatim, in:

* the log lines of both runs (JSON and text);
* every file of the SQLite database (the tokens are stored sealed: their plain text is nowhere);
* everything nerve sent Slack (messages, edits, ephemerals, Socket Mode acks);
* the `/metrics` pages;
* what the model provider was sent;
* what the MCP servers received: the notes server only ever gets its own bearer token; the recorder
  (and its environment) gets nothing secret at all.

Expected: 0 matches everywhere, besides the notes server's own token in its own traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import string
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from servers.notes_oauth.sign_in import sign_in_as
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.ports import unused_port
from tests.test_cli import nerve_env
from tests.test_notes_oauth_server import READY as NOTES_READY
from tests.test_slack_harness import mention, sign
from tests.test_slack_sign_in import Model, button_url, links_to, said_in, who_the_tool_said, whoami

CHANNEL = "C0CHANNEL"
ALICE = "U0ALICE"
_rng = random.Random(20261204)


def _chars(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# Shaped like the real ones, so the log's shape-based hiding is exercised too.
SECRETS = {
    "SLACK_BOT_TOKEN": f"xoxb-{_chars(12, string.digits)}-{_chars(13, string.digits)}-{_chars(24)}",
    "SLACK_APP_TOKEN": f"xapp-1-A0000APP-{_chars(13, string.digits)}-{_chars(64, '0123456789abcdef')}",
    "SLACK_SIGNING_SECRET": _chars(32, "0123456789abcdef"),
    "OPENAI_API_KEY": f"sk-proj-{_chars(48)}",
    "DISCORD_BOT_TOKEN": f"MTE{_chars(23)}.{_chars(6)}.{_chars(38)}",
    "NERVE_SECRET_KEY": _chars(43, string.ascii_letters + string.digits + "-_"),
}


class Nerve:
    """`python -m bot slack` as a child process; every line it logs is kept."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self, ready: re.Pattern[str]) -> str:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "slack",
            env=self.env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())
        return await self.wait_line(ready)

    async def _read(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        async for raw in self._process.stderr:
            async with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()

    async def wait_line(self, pattern: re.Pattern[str], within: float = 60.0) -> str:
        def found() -> str | None:
            return next((line for line in self.lines if pattern.search(line)), None)

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(lambda: found() is not None or self._exited())
        except TimeoutError:
            raise AssertionError(f"no log line like {pattern.pattern!r}:\n{''.join(self.lines)}") from None
        line = found()
        assert line is not None, f"nerve exited:\n{''.join(self.lines)}"
        return line

    def _exited(self) -> bool:
        return self._process is not None and self._process.returncode is not None

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await asyncio.wait_for(self._process.wait(), 30)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._reader, 10)


@contextlib.asynccontextmanager
async def nerve(env: dict[str, str], ready: re.Pattern[str]) -> AsyncIterator[tuple[Nerve, str]]:
    process = Nerve(env)
    try:
        yield process, await process.start(ready)
    finally:
        await process.stop()


@contextlib.asynccontextmanager
async def recorded_notes(tmp_path: Path) -> AsyncIterator[tuple[str, Path, Path]]:
    """The notes server writing down its traffic; yields its MCP URL, the traffic and its state."""
    traffic, state = tmp_path / "notes-traffic.jsonl", tmp_path / "notes-state.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mcp_servers.recorded_notes",
        "--port",
        "0",
        "--state",
        str(state),
        cwd=str(ROOT),
        env={**nerve_env(tmp_path), "NOTES_TRAFFIC": str(traffic)},
        stdout=asyncio.subprocess.PIPE,
        stderr=(tmp_path / "notes-stderr.log").open("ab"),
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            while not (found := NOTES_READY.search((await process.stdout.readline()).decode())):
                assert process.returncode is None, (tmp_path / "notes-stderr.log").read_text()
        yield found.group(1), traffic, state
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), 15)


def echo_into_the_recorder(request: dict[str, Any]) -> Reply:
    """The model sends everything it was sent to a tool: any secret in its context would go too."""
    return tool_reply(FakeCall(name="anything", arguments=json.dumps({"seen": request["messages"]})))


def echo_everything(request: dict[str, Any]) -> Reply:
    return reply("Here is all I was sent: " + json.dumps(request["messages"]))


def oauth_tokens(state: Path) -> dict[str, str]:
    """Every token and code the notes server issued, from its state file."""
    issued = json.loads(state.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for kind in ("access_tokens", "refresh_tokens", "codes", "used_codes"):
        for i, token in enumerate(issued.get(kind) or {}):
            found[f"notes {kind[:-1]} {i + 1}"] = token
    for i, client in enumerate((issued.get("clients") or {}).values()):
        if client.get("client_secret"):
            found[f"notes client_secret {i + 1}"] = client["client_secret"]
    return found


async def scrape(http: aiohttp.ClientSession, base: str) -> str:
    async with http.get(f"{base}/metrics") as page:
        assert page.status == 200
        return await page.text()


async def test_a_session_with_a_sign_in_leaves_no_secret_in_logs_database_replies_metrics_or_mcp_traffic(
    tmp_path: Path,
) -> None:
    port = unused_port()
    base = f"http://127.0.0.1:{port}"
    recorder_log = tmp_path / "recorder.jsonl"
    model = Model(
        [
            tool_reply(FakeCall(name="connect_notes")),  # before Alice connected notes
            whoami(),  # her turn goes on once she signed in
            who_the_tool_said,
            echo_into_the_recorder,
            echo_everything,
            whoami(),  # the second run, on the sign-in the first one kept
            who_the_tool_said,
            echo_into_the_recorder,
            echo_everything,
        ]
    )
    metrics: list[str] = []
    async with (
        recorded_notes(tmp_path) as (notes_url, notes_traffic, notes_state),
        FakeSlack() as slack,
        FakeLLMServer(model) as llm,
        aiohttp.ClientSession() as http,
    ):
        servers = tmp_path / "mcp.json"
        notes = {
            "url": notes_url,
            "allowPrivateNetwork": True,
            "trustAnnotations": True,
            "auth": {"type": "oauth", "identity": "user"},
        }
        recorder = {
            "command": sys.executable,
            "trustAnnotations": True,
            "args": ["-m", "tests.mcp_servers.recorder", str(recorder_log)],
            "cwd": str(ROOT),
        }
        servers.write_text(json.dumps({"mcpServers": {"notes": notes, "recorder": recorder}}))
        env = nerve_env(
            tmp_path,
            NERVE_MCP_CONFIG=str(servers),
            SLACK_API_BASE_URL=slack.api_url,
            NERVE_HTTP_HOST="127.0.0.1",
            NERVE_HTTP_PORT=str(port),
            NERVE_PUBLIC_URL=base,
            OPENAI_BASE_URL=llm.base_url,
            NERVE_MODEL="test-model",
            NERVE_LOG_LEVEL="DEBUG",
            NERVE_LOG_FORMAT="json",
            **{name: value for name, value in SECRETS.items() if name != "SLACK_APP_TOKEN"},
        )
        env.pop("SLACK_APP_TOKEN", None)
        signed = SECRETS["SLACK_SIGNING_SECRET"]

        # First run: HTTP, JSON logs. Alice signs in to notes, then has the model echo everything.
        ready = re.compile(r"serving Slack events and interactions at (http://\S+/slack/events)")
        async with nerve(env, ready) as (first, line):
            url = ready.search(line).group(1)  # type: ignore[union-attr]
            root = "1600000000.700100"
            body = json.dumps(mention(f"<@{BOT_USER_ID}> who am I at notes?", ts=root, user=ALICE))
            assert await post_signed_with(http, url, body, signed) == 200
            await slack.wait_for(lambda s: bool(links_to(s, ALICE)), 60)
            location = await sign_in_as(button_url(links_to(slack, ALICE)[0]), "alice")
            async with http.get(location) as page:
                assert page.status == 200
            await slack.wait_for(lambda s: bool(said_in(s, root, "as alice")), 30)
            body = json.dumps(mention(f"<@{BOT_USER_ID}> and what do you see?", thread_ts=root, user=ALICE))
            assert await post_signed_with(http, url, body, signed) == 200
            await slack.wait_for(lambda s: bool(said_in(s, root, "all I was sent")), 30)
            metrics.append(await scrape(http, base))

        # Second run: Socket Mode, text logs, the kept sign-in.
        env.update(NERVE_LOG_FORMAT="text", SLACK_APP_TOKEN=SECRETS["SLACK_APP_TOKEN"])
        async with nerve(env, re.compile(r"serving /healthz")) as (second, _):
            again = "1600000000.700200"
            await slack.send_envelope(mention(f"<@{BOT_USER_ID}> who am I now?", ts=again, user=ALICE))
            await slack.wait_for(lambda s: bool(said_in(s, again, "as alice")), 60)
            await slack.send_envelope(mention(f"<@{BOT_USER_ID}> what now?", thread_ts=again, user=ALICE))
            await slack.wait_for(lambda s: len(said_in(s, again, "all I was sent")) == 1, 30)
            metrics.append(await scrape(http, base))
        assert model.moves == [], "every scripted move was used"

        slack_sent = json.dumps([call.body for call in slack.calls] + slack.acks, ensure_ascii=False)
        model_saw = json.dumps(llm.requests, ensure_ascii=False)

    tokens = oauth_tokens(notes_state)
    assert any(name.startswith("notes access_token") for name in tokens)
    logs = {"JSON log (run 1)": "".join(first.lines), "text log (run 2)": "".join(second.lines)}
    assert all(json.loads(line) for line in first.lines if line.strip()), "run 1 logged JSON lines"
    assert len(first.lines) > 100 and len(second.lines) > 100, "DEBUG logs were captured"
    database, notes_got, recorder_got = written(tmp_path, notes_traffic, recorder_log)
    assert '"environment"' in recorder_got and '"tool": "anything"' in recorder_got
    places: dict[str, str | bytes] = {
        **logs,
        "database files": database,
        "sent to Slack": slack_sent,
        "/metrics": "".join(metrics),
        "sent to the model": model_saw,
        "recorder server (calls and environment)": recorder_got,
        "notes server traffic": notes_got,
    }
    found = []
    for name, value in {**SECRETS, **tokens}.items():
        for place, haystack in places.items():
            if place == "notes server traffic" and name.startswith("notes "):
                continue  # its own tokens and codes: what a sign-in is for
            needle: str | bytes = value.encode() if isinstance(haystack, bytes) else value
            count = haystack.count(needle)  # type: ignore[arg-type]
            if count:
                found.append(f"{name} x{count} in {place}")
    assert found == [], found
    sizes = ", ".join(f"{place} {len(haystack):,}" for place, haystack in places.items())
    secrets = len(SECRETS) + len(tokens)
    print(f"\nfigure: {secrets} secrets x {len(places)} places, 0 matches; characters searched: {sizes}")
    # The searches looked where the secrets would have been: the notes server got its bearer token.
    access = next(token for name, token in tokens.items() if name.startswith("notes access_token"))
    assert f"Bearer {access}" in notes_got
    assert "alice" in slack_sent and "nerve_" in metrics[0]


def written(tmp_path: Path, notes_traffic: Path, recorder_log: Path) -> tuple[bytes, str, str]:
    """Every file of the database (with its WAL), and what the two servers wrote down."""
    database = b"".join(path.read_bytes() for path in sorted(tmp_path.glob("nerve.db*")))
    return database, notes_traffic.read_text(encoding="utf-8"), recorder_log.read_text(encoding="utf-8")


async def post_signed_with(http: aiohttp.ClientSession, url: str, raw: str, secret: str) -> int:
    headers = {**sign(raw, secret), "Content-Type": "application/json"}
    async with http.post(url, data=raw, headers=headers) as response:
        await response.read()
        return response.status

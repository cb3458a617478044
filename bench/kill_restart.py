"""SIGKILL of `nerve slack` at random moments while deliveries flow; what must survive the kills.

A real `python -m bot slack` process in HTTP mode (the Events API), against the local fake of
Slack's Web API, the local fake model service and two real stdio MCP servers
(`tests.mcp_servers.trust`, and `tests.mcp_servers.asks` on the 2026-07-28 revision, whose tools ask
the person), is killed with SIGKILL at seeded random moments, `kills` times, and started again each
time on the same database. Meanwhile questions keep arriving as signed Events API deliveries: new mentions in
four channels on a steady beat, and four threads where each follow-up comes once the previous one
was answered. A delivery that is not acked (refused connection, the process died mid-request) is
sent again, as Slack retries it, until it gets its 200. Every answer needs one round of tool calls
(`read_note`, a real call to the MCP server), so kills land between a round's call and its storing.

Before the first kill a question parks a write tool call (`append_note`) for approval, and another
makes a tool ask the person (`ask_colour`, an elicitation), which parks its turn too; after the last
restart the approval is clicked, and the question's "Fill in" is clicked and its form submitted, all
of which must still work.

At the end (one more start, every question answered or the wait timed out, then SIGTERM):

* `PRAGMA integrity_check` is `ok`;
* lost: questions Slack got a 200 for and that have neither an answer nor a "busy" notice in their
  thread; told busy: those answered "I'm busy right now" instead (a start that finds more events
  left over than NERVE_MAX_CONCURRENT_TURNS + NERVE_TURN_QUEUE starts them all at once, and the
  turn gate refuses the rest as it would a burst);
* duplicated: answers posted more than once for one question;
* half-written rounds: stored transcripts where an assistant message with tool calls is not
  followed by exactly its tool results (or a tool result has no call before it);
* the approval parked before the kills is approved after them, the tool runs once;
* the question parked before the kills is answered after them: the tool receives that answer once,
  and the turn's answer is posted once in its thread;
* unfinished inbox entries left, MCP server processes left running.

Figures are returned as a dict; `tests/test_kill_restart.py` runs a short version and asserts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import logging
import os
import random
import re
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from bot.turn.gate import BUSY_REPLY
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, own_text
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlack, Posted
from tests.ports import unused_port

ROOT = Path(__file__).resolve().parent.parent
SECRET = "kill-test-signing-secret"
READY = re.compile(r"serving Slack events and interactions at (\S+)")
QUESTION = re.compile(r"q\d{4}")
ANSWER = re.compile(r"^answer to ((?:q\d{4} ?)+)")
APPROVE_TEXT = "approved across kills"
APPROVED_ANSWER = "Added the line after the restarts."
ASK_CHANNEL = "C0ASKS"
COLOUR = "green"
ASKED_ANSWER = f"The door will be {COLOUR}."
ALICE = "U0ALICE"
THINKING = "Thinking…"
RECOVERED = re.compile(r"answering (\d+) Slack event\(s\) or approval\(s\) left unfinished")
FRESH_CHANNELS = 4
THREADS = 4
# Seconds between two new mentions (the steady beat); Slack's wait before it sends a delivery that
# was not acked again (compressed: Slack waits longer after the first retry).
BEAT = 0.5
RETRY_AFTER = 1.0
# A kill lands at a uniform moment of the process's life: from its start to this long after it
# began serving (the previous start's time to serve tells how long starting takes). Many kills thus
# land while it starts: opening the store, starting the MCP server, answering what was left over.
SERVING_WINDOW = 3.0
# A killed process's turns keep their conversations for the turn lease (20 s), and the last start
# may find hundreds of events left over: the last wait ends when every one of them is finished.
FINAL_WAIT = 300.0


# ------------------------------------------------------------------------------------ the process


class Nerve:
    """One `python -m bot slack` process; its log goes to a file (a hundred starts add up)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._env = env
        self._log = log
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.ready_at: float | None = None
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
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

    async def _read(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with self._log.open("a", encoding="utf-8") as log:
            log.write(f"--- start, pid {self.process.pid}\n")
            async for raw in self.process.stderr:
                line = raw.decode(errors="replace")
                log.write(line)
                if READY.search(line) and not self.ready.is_set():
                    self.ready_at = time.monotonic()
                    self.ready.set()
                async with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()

    async def wait_ready(self, within: float = 90.0) -> None:
        assert self._reader is not None
        ended = asyncio.ensure_future(asyncio.shield(self._reader))
        ready = asyncio.ensure_future(self.ready.wait())
        try:
            await asyncio.wait({ended, ready}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            ready.cancel()
        if not self.ready.is_set():
            raise AssertionError(
                f"nerve did not start serving within {within:g} s:\n{''.join(self.lines[-40:])}"
            )

    async def wait_logged(self, check: Callable[[list[str]], bool], within: float) -> None:
        """Wait until the log so far satisfies `check`; TimeoutError after `within` seconds."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: check(self.lines))

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when the machine or the container dies."""
        await self._end(signal.SIGKILL)

    async def stop(self) -> int:
        """SIGTERM, the graceful way; returns the exit code."""
        return await self._end(signal.SIGTERM)

    async def _end(self, how: signal.Signals) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(how)
        code = await asyncio.wait_for(self.process.wait(), 60)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 10)
        return code


@contextlib.asynccontextmanager
async def reaped() -> AsyncIterator[list[Nerve]]:
    """The scenario's processes: one still running when the scenario ends early (a check failed) is
    killed, so a failed run leaves no bot and no MCP servers behind."""
    started: list[Nerve] = []
    try:
        yield started
    finally:
        for nerve in started:
            if nerve.process is not None and nerve.process.returncode is None:
                with contextlib.suppress(Exception):
                    await nerve.kill()


# ------------------------------------------------------------------------------------ Slack's side


def signed(raw: str) -> dict[str, str]:
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:{raw}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


@dataclass
class Question:
    token: str
    channel: str
    ts: str
    thread_ts: str | None
    event_id: str
    acked: bool = False
    attempts: int = 0

    @property
    def root(self) -> str:
        return self.thread_ts or self.ts

    def body(self) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": ALICE,
            "text": f"<@{BOT_USER_ID}> question {self.token}",
            "ts": self.ts,
            "channel": self.channel,
            "team": TEAM_ID,
        }
        if self.thread_ts:
            event["thread_ts"] = self.thread_ts
        return {
            "token": "legacy",
            "team_id": TEAM_ID,
            "api_app_id": "A0000APP",
            "type": "event_callback",
            "event_id": self.event_id,
            "event_time": int(time.time()),
            "event": event,
        }


@dataclass
class Deliveries:
    """Slack's side of the Events API: each delivery is sent again until nerve acks it with a 200."""

    url: str
    http: aiohttp.ClientSession
    questions: list[Question] = field(default_factory=list)
    refused: int = 0
    ack_ms: list[float] = field(default_factory=list)

    async def deliver(self, question: Question) -> None:
        self.questions.append(question)
        raw = json.dumps(question.body())
        while True:
            headers = {"Content-Type": "application/json", **signed(raw)}
            if question.attempts:
                headers["X-Slack-Retry-Num"] = str(question.attempts)
                headers["X-Slack-Retry-Reason"] = "http_timeout"
            question.attempts += 1
            started = time.perf_counter()
            try:
                async with asyncio.timeout(3.0):  # Slack's own wait for the ack
                    async with self.http.post(self.url, data=raw, headers=headers) as response:
                        await response.read()
                        status = response.status
            except (aiohttp.ClientError, TimeoutError, OSError):
                status = 0
            if status == 200:
                question.acked = True
                self.ack_ms.append((time.perf_counter() - started) * 1000)
                return
            self.refused += 1
            await asyncio.sleep(RETRY_AFTER)


def answered_tokens(slack: FakeSlack) -> Counter[str]:
    """How many posted messages answer each question (an answer may name two merged questions)."""
    counted: Counter[str] = Counter()
    for posted in slack.posted:
        found = ANSWER.match(posted.text)
        if found:
            counted.update(found.group(1).split())
    return counted


def model(rng: random.Random) -> Callable[[dict[str, Any]], Reply]:
    """Each question takes one round of `read_note`, then an answer naming it; the approval question
    calls `append_note` (a write: it parks until approved); the colour question calls `ask_colour`
    (it asks the person: the turn parks until answered) and answers with the colour it was given."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        last = messages[-1]
        asked = own_text([m for m in messages if m.get("role") == "user"][-1].get("content") or "")
        if "pick a colour" in asked:
            if last.get("role") == "tool":
                given = re.search(r"door: (\w+)", str(last.get("content")))
                return Reply(content=f"The door will be {given.group(1) if given else 'unknown'}.")
            call = FakeCall(name="ask_colour", arguments=json.dumps({"label": "door"}))
            return Reply(tool_calls=(call,))
        if "please add" in asked:
            if last.get("role") == "tool":
                return Reply(content=APPROVED_ANSWER)
            call = FakeCall(name="append_note", arguments=json.dumps({"text": APPROVE_TEXT}))
            return Reply(tool_calls=(call,))
        if last.get("role") == "tool":
            tokens = " ".join(QUESTION.findall(asked))
            return Reply(content=f"answer to {tokens}", delay=rng.uniform(0.05, 0.4))
        return Reply(tool_calls=(FakeCall(name="read_note"),), delay=rng.uniform(0.05, 0.4))

    return respond


# ------------------------------------------------------------------------------------ what is left


def integrity(db: Path) -> str:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])


def half_written_rounds(db: Path) -> list[str]:
    """Stored transcripts that break the round rule: an assistant message with tool calls is followed
    by exactly one result for each of its calls, and every result follows its call."""
    problems: list[str] = []
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT conversation_id, role, tool_calls, tool_call_id FROM messages"
            " ORDER BY conversation_id, seq"
        ).fetchall()
    for conversation, messages in itertools.groupby(rows, key=lambda row: row[0]):
        expected: set[str] = set()
        for _, role, tool_calls, tool_call_id in messages:
            if role == "tool":
                if tool_call_id not in expected:
                    problems.append(
                        f"conversation {conversation}: a result of {tool_call_id} without its call"
                    )
                expected.discard(tool_call_id)
                continue
            if expected:
                problems.append(f"conversation {conversation}: calls {sorted(expected)} have no result")
            expected = {call["id"] for call in json.loads(tool_calls)} if tool_calls else set()
        if expected:
            problems.append(
                f"conversation {conversation}: calls {sorted(expected)} have no result at the end"
            )
    return problems


def unfinished_events(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM inbox WHERE status != 'done'").fetchone()[0])


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment carries `marker` (the MCP servers of this run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (proc / "environ").read_bytes():
                status = (proc / "status").read_text()
                if "zombie" not in status:
                    found.append(int(proc.name))
    return found


def approval_buttons(posted: Posted) -> list[dict[str, Any]]:
    return [
        element
        for block in posted.current.get("blocks") or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if str(element.get("action_id", "")).startswith("nerve_approval.approve")
    ]


def input_buttons(posted: Posted) -> dict[str, dict[str, Any]]:
    """A request for input's buttons as its message stands, by what they do (fill, decline)."""
    return {
        str(element["action_id"]).split(".")[1]: element
        for block in posted.current.get("blocks") or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if str(element.get("action_id", "")).startswith("nerve_input.")
    }


def interaction(payload: dict[str, Any]) -> str:
    """An interaction's body, form-encoded as Slack sends it."""
    return urlencode({"payload": json.dumps(payload)})


def click_body(message: Posted, pressed: dict[str, Any], trigger: str = "1.2.3") -> str:
    payload = {
        "type": "block_actions",
        "user": {"id": ALICE, "username": "alice", "team_id": TEAM_ID},
        "api_app_id": "A0000APP",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        "trigger_id": trigger,
        "team": {"id": TEAM_ID, "domain": "nerve-test"},
        "channel": {"id": message.channel, "name": "general"},
        "message": {
            "type": "message",
            "ts": message.ts,
            "thread_ts": message.thread_ts,
            "text": message.text,
            "blocks": message.current.get("blocks"),
        },
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "type": "button",
                "action_id": pressed["action_id"],
                "block_id": "b",
                "value": pressed["value"],
                "action_ts": "1700000000.000001",
            }
        ],
    }
    return interaction(payload)


def colour_answer(slack: FakeSlack, colour: str) -> dict[str, Any]:
    """The `view_submission` of the last modal opened, with `colour` picked in its one input."""
    view = slack.views[-1]
    [block] = [b for b in view.current["blocks"] if b.get("type") == "input"]
    [picked] = [o for o in block["element"]["options"] if o["text"]["text"] == colour]
    value = {"value": {"type": "static_select", "selected_option": picked}}
    return slack.view_payload("view_submission", view, ALICE, {block["block_id"]: value})


# ------------------------------------------------------------------------------------ the scenario


def nerve_environment(
    folder: Path, slack: FakeSlack, llm: FakeLLMServer, port: int, notes: Path
) -> dict[str, str]:
    trust = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.trust"],
        "cwd": str(ROOT),
        "env": {"TRUST_NOTES": str(notes), "TRUST_LOG": str(notes.with_suffix(".log"))},
    }
    # On 2026-07-28 a question parks its turn in the database (an older server's waits in the process).
    asks = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.asks", "--protocol", "2026-07-28"],
        "cwd": str(ROOT),
        "env": {"ASKS_LOG": str(folder / "asks.log")},
    }
    servers = folder / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"notes": trust, "asks": asks}}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_", "SLACK_"))}
    env.update(
        NERVE_DB=str(folder / "nerve.db"),
        NERVE_MCP_CONFIG=str(servers),
        NERVE_LOG_FILE=str(folder / "nerve-chat.log"),
        NERVE_LOG_LEVEL="INFO",
        SLACK_BOT_TOKEN="xoxb-kill-test",
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_API_BASE_URL=slack.api_url,
        NERVE_HTTP_HOST="127.0.0.1",
        NERVE_HTTP_PORT=str(port),
        OPENAI_BASE_URL=llm.base_url,
        OPENAI_API_KEY="test-key",
        NERVE_MODEL="test-model",
        NERVE_LLM_TIMEOUT="20",
        # The approval parked before the first kill is decided after the last one: 100 kills take
        # longer than the default 10 minutes a request waits.
        NERVE_APPROVAL_TIMEOUT="7200",
        NERVE_INPUT_TIMEOUT="7200",
        # A start after a kill takes up every event left over. On a slow or busy machine more are
        # left than the default queue holds, and the gate would tell the rest "busy": that is the
        # burst tests' subject, not this one's, whose every question must get its answer.
        NERVE_TURN_QUEUE="1000",
    )
    return env


async def kill_restart(
    folder: Path,
    *,
    kills: int,
    seed: int = 13,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the scenario; returns its figures (see the module's docstring)."""
    # The model service's peer is killed mid-request a hundred times: that is the point, not news.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    rng = random.Random(seed)
    model_rng = random.Random(seed + 1)
    notes = folder / "notes.txt"
    notes.write_text("first line\n", encoding="utf-8")
    port = unused_port()
    numbers = itertools.count(1)
    started = time.perf_counter()
    phases: Counter[str] = Counter()
    async with FakeSlack() as slack, FakeLLMServer(model(model_rng), strict=False) as llm, reaped() as nerves:
        env = nerve_environment(folder, slack, llm, port, notes)
        url = f"http://127.0.0.1:{port}/slack/events"
        async with aiohttp.ClientSession() as http:
            deliveries = Deliveries(url=url, http=http)
            flowing = asyncio.Event()
            flowing.set()
            senders: set[asyncio.Task[None]] = set()

            def new_question(channel: str, thread_ts: str | None) -> Question:
                n = next(numbers)
                return Question(
                    token=f"q{n:04d}",
                    channel=channel,
                    ts=f"1600000000.{n:06d}",
                    thread_ts=thread_ts,
                    event_id=f"EvKill{n:06d}",
                )

            def send(question: Question) -> None:
                task = asyncio.create_task(deliveries.deliver(question))
                senders.add(task)
                task.add_done_callback(senders.discard)

            async def fresh_mentions() -> None:
                for i in itertools.count():
                    if not flowing.is_set():
                        return
                    send(new_question(f"C0KILL{i % FRESH_CHANNELS:02d}", None))
                    await asyncio.sleep(BEAT)

            async def conversation(k: int) -> None:
                channel, root = f"C0KTHR{k:02d}", None
                while flowing.is_set():
                    question = new_question(channel, root)
                    root = root or question.ts
                    await deliveries.deliver(question)
                    # The next follow-up once this one is answered (or the flow stops).
                    while flowing.is_set():
                        with contextlib.suppress(TimeoutError):
                            await slack.wait_for(lambda s, t=question.token: bool(answered_tokens(s)[t]), 1.0)
                            break

            async def mention_once(question: Question, text: str) -> None:
                body = question.body()
                body["event"]["text"] = f"<@{BOT_USER_ID}> {text}"
                raw = json.dumps(body)
                headers = {"Content-Type": "application/json", **signed(raw)}
                async with http.post(url, data=raw, headers=headers) as r:
                    assert r.status == 200, f"{question.event_id} was refused with {r.status}"

            # The parked approval and the parked question, before the first kill.
            first = Nerve(env, folder / "nerve-stderr.log")
            nerves.append(first)
            first_started = time.monotonic()
            await first.start()
            await first.wait_ready()
            assert first.ready_at is not None
            start_time = first.ready_at - first_started
            ask = Question(
                token="please",
                channel="C0APPROVE",
                ts="1600000001.000001",
                thread_ts=None,
                event_id="EvKillApproval",
            )
            colour = Question(
                token="colour",
                channel=ASK_CHANNEL,
                ts="1600000001.000002",
                thread_ts=None,
                event_id="EvKillQuestion",
            )
            await mention_once(ask, "please add a line to the note")
            await mention_once(colour, "pick a colour for the door")
            await slack.wait_for(
                lambda s: (
                    any(approval_buttons(p) for p in s.thread("C0APPROVE", ask.ts))
                    and any(input_buttons(p) for p in s.thread(ASK_CHANNEL, colour.ts))
                ),
                within=60,
            )
            # Parked and recorded: the kills start once both events are finished.
            finished = [f"finished Slack event {q.event_id}" for q in (ask, colour)]
            await first.wait_logged(
                lambda lines: all(any(f in line for line in lines) for f in finished), within=30
            )

            load = [asyncio.create_task(fresh_mentions())]
            load += [asyncio.create_task(conversation(k)) for k in range(THREADS)]
            nerve, starting = first, first_started
            for _ in range(kills):
                await asyncio.sleep(
                    max(0.0, starting + rng.uniform(0.0, start_time + SERVING_WINDOW) - time.monotonic())
                )
                phases["serving" if nerve.ready.is_set() else "starting"] += 1
                await nerve.kill()
                if nerve.ready_at is not None:
                    start_time = nerve.ready_at - starting
                nerve = Nerve(env, folder / "nerve-stderr.log")
                nerves.append(nerve)
                starting = time.monotonic()
                await nerve.start()
            flowing.clear()
            await nerve.wait_ready()
            for task in load:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 60)
            async with asyncio.timeout(60):
                while senders:
                    await asyncio.gather(*list(senders))
            asked = [q for q in deliveries.questions]

            def replied(q: Question, counted: Counter[str]) -> bool:
                return bool(counted[q.token]) or any(
                    p.text == BUSY_REPLY for p in slack.thread(q.channel, q.root)
                )

            for _ in range(int(FINAL_WAIT / 0.5)):
                counted = answered_tokens(slack)
                if all(replied(q, counted) for q in asked) and unfinished_events(folder / "nerve.db") <= 0:
                    break
                await asyncio.sleep(0.5)

            # The approval parked before the first kill, decided after the last restart.
            [approval] = [p for p in slack.thread("C0APPROVE", ask.ts) if approval_buttons(p)]
            pressed = approval_buttons(approval)[0]
            raw = click_body(approval, pressed)
            headers = {"Content-Type": "application/x-www-form-urlencoded", **signed(raw)}
            async with http.post(url, data=raw, headers=headers) as r:
                click_status = r.status
            approved = False
            with contextlib.suppress(TimeoutError):
                await slack.wait_for(
                    lambda s: any(p.text == APPROVED_ANSWER for p in s.thread("C0APPROVE", ask.ts)), within=60
                )
                approved = True

            # The question parked before the first kill: "Fill in" opens the form, which is sent.
            [request] = [p for p in slack.thread(ASK_CHANNEL, colour.ts) if input_buttons(p)]
            views_before = len(slack.views)
            raw = click_body(request, input_buttons(request)["fill"], slack.trigger())
            headers = {"Content-Type": "application/x-www-form-urlencoded", **signed(raw)}
            async with http.post(url, data=raw, headers=headers) as r:
                question_click_status = r.status
            question_submit_status = 0
            with contextlib.suppress(TimeoutError):
                await slack.wait_for(lambda s: len(s.views) > views_before, within=30)
                raw = interaction(colour_answer(slack, COLOUR))
                headers = {"Content-Type": "application/x-www-form-urlencoded", **signed(raw)}
                async with http.post(url, data=raw, headers=headers) as r:
                    await r.read()
                    question_submit_status = r.status
            question_answered = False
            with contextlib.suppress(TimeoutError):
                await slack.wait_for(
                    lambda s: any(p.text == ASKED_ANSWER for p in s.thread(ASK_CHANNEL, colour.ts)),
                    within=60,
                )
                question_answered = True
            await asyncio.sleep(2.0)  # a late second answer would show up now
            exit_code = await nerve.stop()

    db = folder / "nerve.db"
    counted = answered_tokens(slack)
    acked = [q for q in asked if q.acked]
    misplaced = 0
    for q in asked:
        in_thread = [p for p in slack.thread(q.channel, q.root) if q.token in QUESTION.findall(p.text)]
        if counted[q.token] and not in_thread:
            misplaced += 1
    others = Counter(
        p.text
        for p in slack.posted
        if not ANSWER.match(p.text)
        and not approval_buttons(p)
        and "nerve_approval" not in json.dumps(p.versions[0])
        and p.text != APPROVED_ANSWER
        and p.channel != ASK_CHANNEL
    )
    log = (folder / "nerve-stderr.log").read_text(encoding="utf-8", errors="replace")
    tool_log = notes.with_suffix(".log").read_text(encoding="utf-8").splitlines()
    appended = [line for line in tool_log if json.loads(line)["tool"] == "append_note"]
    asks_log = folder / "asks.log"
    asked_lines = asks_log.read_text(encoding="utf-8").splitlines() if asks_log.exists() else []
    received = [entry["answer"] for entry in map(json.loads, asked_lines) if entry["answer"] is not None]
    question_answers = [p for p in slack.thread(ASK_CHANNEL, colour.ts) if p.text == ASKED_ANSWER]
    rounds = half_written_rounds(db)
    out: dict[str, Any] = {
        "kills": kills,
        "kills_while_starting": phases["starting"],
        "kills_while_serving": phases["serving"],
        "seed": seed,
        "questions": len(asked),
        "deliveries_sent": sum(q.attempts for q in asked),
        "deliveries_not_acked": deliveries.refused,
        "acked": len(acked),
        "answered": sum(1 for q in acked if counted[q.token]),
        # Neither answered nor told anything: dropped in silence.
        "lost": sum(1 for q in acked if not replied(q, counted)),
        "duplicated": sum(max(0, counted[q.token] - 1) for q in asked),
        "misplaced": misplaced,
        "model_requests": len(llm.requests),
        "tool_calls_run": len(tool_log),
        "integrity_check": integrity(db),
        "half_written_rounds": len(rounds),
        "unfinished_inbox_entries": unfinished_events(db),
        "approval_click_status": click_status,
        "approval_answered_after_kills": approved,
        "approved_tool_runs": len(appended),
        "note_lines_added": notes.read_text(encoding="utf-8").count(APPROVE_TEXT),
        "question_click_status": question_click_status,
        "question_submit_status": question_submit_status,
        "question_answered_after_kills": question_answered,
        "question_answers_posted": len(question_answers),
        # Calls of the asking tool that received an answer, and whether each was the one given.
        "asked_tool_runs": len(received),
        "asked_tool_got_the_answer": bool(received)
        and all(r == {"action": "accept", "content": {"colour": COLOUR}} for r in received),
        # Told "busy" instead of an answer (see the module's docstring).
        "told_busy": sum(1 for q in acked if replied(q, counted) and not counted[q.token]),
        "live_messages_left_thinking": sum(1 for p in slack.posted if p.text == THINKING),
        "events_recovered_at_starts": sum(int(n) for n in RECOVERED.findall(log)),
        "other_posts": dict(others),
        "tracebacks_in_log": log.count("Traceback"),
        "mcp_servers_left_running": len(processes_with(str(notes)) + processes_with(str(asks_log))),
        "last_exit_code": exit_code,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    out["goal_met"] = (
        out["integrity_check"] == "ok"
        and out["lost"] == 0
        and out["duplicated"] == 0
        and out["misplaced"] == 0
        and out["half_written_rounds"] == 0
        and approved
        and out["approved_tool_runs"] == 1
        and out["note_lines_added"] == 1
        and question_answered
        and out["question_answers_posted"] == 1
        and out["asked_tool_runs"] == 1
        and out["asked_tool_got_the_answer"]
    )
    report(
        f"{kills} SIGKILLs ({phases['starting']} while starting), {len(asked)} questions, "
        f"{out['deliveries_sent']} deliveries ({out['deliveries_not_acked']} not acked, sent again): lost "
        f"{out['lost']}, duplicated {out['duplicated']}, misplaced {misplaced}, half-written rounds "
        f"{len(rounds)}, integrity {out['integrity_check']}, approval after the kills: "
        f"{'answered' if approved else 'NOT answered'}, question after the kills: "
        f"{'answered' if question_answered else 'NOT answered'} (the tool got {received}); {out['wall_s']} s"
    )
    for problem in rounds[:10]:
        report(f"  {problem}")
    for q in [q for q in asked if counted[q.token] > 1][:5]:
        shown = [[v.get("text") for v in p.versions] for p in slack.thread(q.channel, q.root)]
        report(f"  {q.token} ({q.event_id}) answered {counted[q.token]} times: {shown}")
    return out


KILLS = 100


async def run(report: Callable[[str], None] = print) -> dict[str, Any]:
    """`python -m bench --only kills`: the scenario with 100 kills (about ten minutes)."""
    with tempfile.TemporaryDirectory(prefix="nerve-kills-bench-") as tmp:
        async with asyncio.timeout(KILLS * 30 + 600):
            out = await kill_restart(Path(tmp), kills=KILLS, report=report)
    out.pop("other_posts")  # texts, not figures: the counts that matter are figures of their own
    return out

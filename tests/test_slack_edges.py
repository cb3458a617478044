"""The Slack front end under hostile or unlucky input: broken text, forged headers, floods, big posts."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from bot.agent import AgentConfig
from bot.types import ConversationKey
from tests.fakes.llm_server import Reply, reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlack
from tests.test_slack_harness import SIGNING_SECRET, Rig, mention, rig, user_texts

CHANNEL = "C0CHANNEL"


def signature(raw: bytes, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, hashlib.sha256)
    return "v0=" + digest.hexdigest()


async def post(r: Rig, raw: bytes, headers: dict[str, str]) -> tuple[int, str]:
    async with r.http.post(r.url, data=raw, headers={"Content-Type": "application/json", **headers}) as resp:
        return resp.status, await resp.text()


async def post_signed(r: Rig, raw: bytes) -> int:
    ts = str(int(time.time()))
    status, _ = await post(r, raw, {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature(raw, ts)})
    return status


def key(thread: str) -> ConversationKey:
    return ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=thread)


# --- text that is not valid Unicode ---------------------------------------------------------------


async def test_a_lone_surrogate_in_slack_text_is_acknowledged_stored_and_answered(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("got it")]) as r:
        root = "1600000000.007000"
        # json.dumps writes the lone surrogate as the escape "\ud800", as a JSON producer may.
        raw = json.dumps(mention(f"<@{BOT_USER_ID}> broken \ud800 text", ts=root)).encode()
        assert b"\\ud800" in raw
        assert await post_signed(r, raw) == 200
        await r.settle()
        assert [p.text for p in r.slack.thread(CHANNEL, root)] == ["got it"]
        assert user_texts(r.llm.requests[0]) == ["broken \ufffd text"]
        [question, _] = await r.store.history(key(root))
        assert question.content == "broken \ufffd text"


async def test_invalid_utf8_in_a_slack_delivery_is_acknowledged_and_answered(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("got it")]) as r:
        root = "1600000000.007100"
        raw = json.dumps(mention(f"<@{BOT_USER_ID}> bad BYTES here", ts=root)).encode()
        raw = raw.replace(b"BYTES", b"\xff\xfe\xc3")
        assert await post_signed(r, raw) == 200
        await r.settle()
        assert [p.text for p in r.slack.thread(CHANNEL, root)] == ["got it"]
        assert user_texts(r.llm.requests[0]) == ["bad \ufffd\ufffd\ufffd here"]


# --- signature headers ----------------------------------------------------------------------------


def _headers(case: str, raw: bytes) -> dict[str, str]:
    now = str(int(time.time()))
    good = signature(raw, now)
    return {
        "no timestamp": {"X-Slack-Signature": good},
        "no signature": {"X-Slack-Request-Timestamp": now},
        "no headers": {},
        "non-numeric timestamp": {"X-Slack-Request-Timestamp": "yesterday", "X-Slack-Signature": good},
        "fractional timestamp": {"X-Slack-Request-Timestamp": now + ".5", "X-Slack-Signature": good},
        "huge timestamp": {"X-Slack-Request-Timestamp": "9" * 5000, "X-Slack-Signature": good},
        "negative timestamp": {"X-Slack-Request-Timestamp": "-" + now, "X-Slack-Signature": good},
        "empty timestamp": {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": good},
        "empty signature": {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": ""},
        "wrong version": {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v1=" + good[3:]},
        "not hex": {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v0=" + "z" * 64},
        "short": {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": good[:-1]},
    }[case]


@pytest.mark.parametrize(
    "case",
    [
        "no timestamp",
        "no signature",
        "no headers",
        "non-numeric timestamp",
        "fractional timestamp",
        "huge timestamp",
        "negative timestamp",
        "empty timestamp",
        "empty signature",
        "wrong version",
        "not hex",
        "short",
    ],
)
async def test_a_malformed_signature_header_gets_401_and_one_log_line(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(tmp_path, []) as r:
        raw = json.dumps(mention(f"<@{BOT_USER_ID}> hi")).encode()
        caplog.clear()
        with caplog.at_level(logging.INFO):
            status, _ = await post(r, raw, _headers(case, raw))
        await r.settle()
        assert status == 401
        assert r.llm.requests == [] and r.slack.posted == []
        assert await r.store.unfinished_events("slack") == []
        assert not [rec for rec in caplog.records if rec.exc_info], "no traceback in the log"
        [line] = [rec for rec in caplog.records if rec.levelno >= logging.INFO]
        assert "signature" in line.getMessage().lower()
        assert "hi" not in line.getMessage() and SIGNING_SECRET not in line.getMessage()


async def test_a_valid_signature_still_passes_after_a_refused_one(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("hello")]) as r:
        root = "1600000000.007200"
        raw = json.dumps(mention(f"<@{BOT_USER_ID}> hi", ts=root)).encode()
        assert (await post(r, raw, {"X-Slack-Request-Timestamp": "x", "X-Slack-Signature": "v0=0"}))[0] == 401
        assert await post_signed(r, raw) == 200
        await r.settle()
        assert [p.text for p in r.slack.thread(CHANNEL, root)] == ["hello"]


# --- where the HTTP server listens ----------------------------------------------------------------


async def test_the_events_server_listens_on_the_configured_host(tmp_path: Path) -> None:
    from adapters.slack.serve import run_slack
    from tests.test_slack_harness import core, settings_for

    async with core(tmp_path, []) as c:
        settings = settings_for(c.slack, nerve_http_host="127.0.0.1")
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(run_slack(c.agent, settings, ready=ready))
        try:
            async with asyncio.timeout(10):
                done, _ = await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
            if task in done:
                task.result()
            url = ready.result()
            assert url.startswith("http://127.0.0.1:"), url
            port = int(url.split(":")[2].split("/")[0])
            assert ("127.0.0.1", port) in _listening_sockets()
            assert ("0.0.0.0", port) not in _listening_sockets()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _listening_sockets() -> set[tuple[str, int]]:
    """(address, port) of every IPv4 TCP socket listening on this machine, from /proc/net/tcp."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        if state != "0A":  # LISTEN
            continue
        address, port = local.split(":")
        octets = [str(int(address[i : i + 2], 16)) for i in range(0, 8, 2)]
        found.add((".".join(reversed(octets)), int(port, 16)))
    return found


# --- size and load limits, as Slack users meet them -----------------------------------------------


async def test_a_slack_question_over_the_size_limit_gets_the_limit_in_its_thread_and_no_model_call(
    tmp_path: Path,
) -> None:
    config = AgentConfig(max_question_chars=1000)
    async with rig(tmp_path, [], config=config) as r:
        root = "1600000000.007300"
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> " + "z" * 1500, ts=root)) == 200
        await r.settle()
        [post_] = r.slack.thread(CHANNEL, root)
        assert post_.text == "Your message is 1,500 characters; the limit is 1,000. Please shorten it."
        assert r.llm.requests == []
        [question, _] = await r.store.history(key(root))
        assert question.content == "z" * 1500


class HeldModel:
    """Answers each question only when released; counts the requests in flight."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.questions: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self._changed = asyncio.Condition()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        question = str(body["messages"][-1]["content"])
        held = self.release.setdefault(question, asyncio.Event())
        async with self._changed:
            self.questions.append(question)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self._changed.notify_all()
        try:
            await held.wait()
        finally:
            self.in_flight -= 1
        return reply(f"answer to {question}")

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(10), self._changed:
            await self._changed.wait_for(lambda: len(self.questions) >= count)

    def let_go(self, question: str) -> None:
        self.release.setdefault(question, asyncio.Event()).set()


def _shows(slack: FakeSlack, root: str, words: str) -> bool:
    return any(words in p.everything() for p in slack.thread(CHANNEL, root))


async def test_a_burst_of_mentions_runs_at_most_the_limit_at_once_in_order_and_tells_the_overflow_busy(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    config = AgentConfig(max_concurrent_turns=2, turn_queue=2)
    roots = [f"1600000000.0074{i:02d}" for i in range(6)]
    async with rig(tmp_path, model, config=config) as r:
        # One at a time, so arrival order is known: two run, two wait in line, two are turned away.
        for i, root in enumerate(roots):
            assert await r.deliver(mention(f"<@{BOT_USER_ID}> q{i}", ts=root)) == 200
            if i < 2:
                await model.wait_for(i + 1)
            elif i < 4:
                await r.slack.wait_for(lambda s, root=root: _shows(s, root, "in line"))
            else:
                await r.slack.wait_for(lambda s, root=root: _shows(s, root, "busy right now"))
        assert model.questions == ["q0", "q1"]
        for root in roots[4:]:
            [busy] = r.slack.thread(CHANNEL, root)
            assert busy.text == "I'm busy right now — please try again in a minute."
        # Each finished turn lets the longest waiter in.
        model.let_go("q1")
        await model.wait_for(3)
        model.let_go("q0")
        await model.wait_for(4)
        assert model.questions == ["q0", "q1", "q2", "q3"]
        model.let_go("q2")
        model.let_go("q3")
        await r.settle()
        assert model.most_in_flight == 2
        for i, root in enumerate(roots[:4]):
            [answer] = r.slack.thread(CHANNEL, root)
            assert answer.text == f"answer to q{i}"
        # The turned-away questions are stored all the same.
        for i, root in enumerate(roots[4:], start=4):
            assert [m.content for m in await r.store.history(key(root))] == [f"q{i}"]
        assert await r.store.unfinished_events("slack") == []

"""Several `nerve slack` processes on one PostgreSQL: every question answered once, in order, through a
SIGKILL of one of them; and how many one-turn conversations a second one, three or one SQLite
process answer.

**Exactly once** (`exactly_once`): `replicas` real `python -m bot slack` processes in HTTP mode
share one PostgreSQL schema (NERVE_DATABASE_URL), the local fake of Slack's Web API and the local
fake model. Questions come in `threads` threads, `per_thread` each; each is delivered twice, at once,
to two different processes (as Slack retries reach another replica behind a load balancer, or two
Socket Mode connections get one event). A thread's next question is sent once both deliveries of
the one before were acked. Part-way, one process is SIGKILLed and started again a few seconds
later; deliveries that find it gone are sent to the next process, as a load balancer would. At the
end: answers per question (lost, duplicated), answers out of their thread's order, stray messages
(a live message left at "Thinking…", an apology), deliveries and acks.

**Throughput** (`throughput`): `conversations` one-turn conversations (one mention each, in
channels of their own, all sent at once) with a model taking `model_delay` seconds, answered by one
SQLite process, one PostgreSQL process, or three PostgreSQL processes; the wall time until the last
answer and each turn's latency (delivery to the answer's final message at Slack).

`tests/test_replicas.py` runs the exactly-once scenario and asserts its figures; `python -m bench
--only replicas` runs both with the figures in `bench/RESULTS.md`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import statistics
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from bench.core_bench import percentile
from bench.kill_restart import Nerve, Question, nerve_environment, signed
from bot.turn.gate import BUSY_REPLY
from tests.fakes.llm_server import FakeLLMServer, Reply
from tests.fakes.slack_api import FakeSlack
from tests.ports import unused_port
from tests.stores import drop_schema, new_schema, server_url

QUESTION = re.compile(r"question (q\d{4})")
ANSWER = re.compile(r"^answer to (q\d{4})$")
# Seconds Slack waits for an ack before it counts a delivery as failed and sends it again.
ACK_WAIT = 3.0
RETRY_AFTER = 0.5
# Seconds without a heartbeat after which a killed process's jobs run elsewhere (kept short here).
STALL_TIMEOUT = 5.0


def echo_model(delay: float) -> Callable[[dict[str, Any]], Reply]:
    """Answers "answer to qNNNN" for the question in the request's last user message."""

    def answer(body: dict[str, Any]) -> Reply:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        found = QUESTION.search(str(users[-1].get("content") if users else ""))
        return Reply(content=f"answer to {found.group(1)}" if found else "no question", delay=delay)

    return answer


class Cluster:
    """`count` nerve processes, each on its own port, sharing one database; deliveries go to them
    as a load balancer sends them: a process that is down is skipped."""

    def __init__(self, folder: Path, envs: list[dict[str, str]]) -> None:
        self.nerves = [Nerve(env, folder / f"nerve-{i}.log") for i, env in enumerate(envs)]
        self.urls = [f"http://127.0.0.1:{env['NERVE_HTTP_PORT']}/slack/events" for env in envs]
        self.up = [False] * len(envs)
        self.deliveries = 0
        self.refused = 0
        self.ack_ms: list[float] = []
        # The questions each process acked: those of a killed one still unanswered show the kill
        # met work in flight (a delivery refused by the kill depends on timing; this does not).
        self.acked: list[set[str]] = [set() for _ in envs]

    async def start(self, index: int) -> None:
        nerve = self.nerves[index]
        nerve.ready.clear()
        await nerve.start()
        await nerve.wait_ready()
        self.up[index] = True

    async def kill(self, index: int) -> None:
        self.up[index] = False
        await self.nerves[index].kill()

    async def deliver(self, http: aiohttp.ClientSession, question: Question, first: int) -> None:
        """Send until some process acks it with a 200, starting at process `first`."""
        raw = json.dumps(question.body())
        attempt = 0
        while True:
            index = (first + attempt) % len(self.urls)
            attempt += 1
            if not self.up[index]:
                if attempt % len(self.urls) == 0:
                    await asyncio.sleep(RETRY_AFTER)  # every process is down: wait for one
                continue
            headers = {"Content-Type": "application/json", **signed(raw)}
            if attempt > 1:
                headers["X-Slack-Retry-Num"] = str(attempt - 1)
                headers["X-Slack-Retry-Reason"] = "http_error"
            self.deliveries += 1
            started = time.perf_counter()
            try:
                async with (
                    asyncio.timeout(ACK_WAIT),
                    http.post(self.urls[index], data=raw, headers=headers) as got,
                ):
                    await got.read()
                    status = got.status
            except (aiohttp.ClientError, TimeoutError, OSError):
                status = 0
            if status == 200:
                self.ack_ms.append((time.perf_counter() - started) * 1000)
                self.acked[index].add(question.token)
                return
            self.refused += 1
            await asyncio.sleep(RETRY_AFTER)

    async def stop_all(self) -> list[int]:
        codes = []
        for index, nerve in enumerate(self.nerves):
            if nerve.process is not None and nerve.process.returncode is None:
                codes.append(await nerve.stop())
            self.up[index] = False
        return codes


@contextlib.asynccontextmanager
async def database(postgres: bool) -> AsyncIterator[str | None]:
    """A schema of its own on the PostgreSQL server (NERVE_TEST_DATABASE_URL, or the local one), as
    a NERVE_DATABASE_URL; None for SQLite."""
    if not postgres:
        yield None
        return
    url = server_url()
    schema = await new_schema(url)
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        await drop_schema(url, schema)


def environments(
    folder: Path, slack: FakeSlack, llm: FakeLLMServer, database_url: str | None, count: int
) -> list[dict[str, str]]:
    envs = []
    for index in range(count):
        home = folder / f"replica-{index}"
        home.mkdir()
        env = nerve_environment(home, slack, llm, unused_port(), home / "notes.txt")
        env.update(NERVE_WORKER_STALL_TIMEOUT=str(STALL_TIMEOUT), NERVE_SHUTDOWN_GRACE="5")
        if database_url is not None:
            env["NERVE_DATABASE_URL"] = database_url
        envs.append(env)
    return envs


def answers(slack: FakeSlack) -> tuple[Counter[str], dict[str, list[tuple[float, str]]], list[str]]:
    """Answer messages per question, each thread's answers as (ts, token), and the other messages."""
    counted: Counter[str] = Counter()
    threads: dict[str, list[tuple[float, str]]] = defaultdict(list)
    stray: list[str] = []
    for posted in slack.posted:
        found = ANSWER.match(posted.text)
        if found is None:
            stray.append(posted.text[:80])
            continue
        counted[found.group(1)] += 1
        threads[f"{posted.channel}:{posted.thread_ts}"].append((float(posted.ts), found.group(1)))
    return counted, threads, stray


async def wait_answered(slack: FakeSlack, tokens: list[str], within: float) -> float:
    """Seconds until every token has an answer (or `within` passed)."""
    started = time.monotonic()
    with contextlib.suppress(TimeoutError):
        await slack.wait_for(lambda s: set(tokens) <= set(answers(s)[0]), within=within)
    return time.monotonic() - started


async def exactly_once(
    folder: Path,
    *,
    replicas: int = 3,
    threads: int = 40,
    per_thread: int = 5,
    kill_after: float = 0.35,
    model_delay: float = 0.2,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The exactly-once scenario (module docstring); returns its figures."""
    nonce = uuid.uuid4().hex[:6]
    total = threads * per_thread
    async with (
        database(True) as url,
        FakeSlack() as slack,
        FakeLLMServer(echo_model(model_delay)) as llm,
        aiohttp.ClientSession() as http,
    ):
        cluster = Cluster(folder, environments(folder, slack, llm, url, replicas))
        await asyncio.gather(*(cluster.start(i) for i in range(replicas)))
        report(f"{replicas} processes serving on one PostgreSQL schema")
        sent = 0
        killed = asyncio.Event()
        restarted_at: float | None = None
        tokens: list[str] = []
        unanswered_at_kill = 0

        async def one_thread(t: int) -> None:
            nonlocal sent
            channel = f"C{t:03d}R{nonce.upper()}"
            root = f"1700000{t:03d}.000100"
            for n in range(per_thread):
                token = f"q{t:02d}{n:02d}"
                tokens.append(token)
                question = Question(
                    token=token,
                    channel=channel,
                    ts=root if n == 0 else f"1700000{t:03d}.{n + 1:04d}00",
                    thread_ts=None if n == 0 else root,
                    event_id=f"Ev{nonce}{t:03d}{n:02d}",
                )
                first = (t + n) % replicas
                await asyncio.gather(
                    cluster.deliver(http, question, first), cluster.deliver(http, question, first + 1)
                )
                sent += 1
                if not killed.is_set() and sent >= total * kill_after:
                    killed.set()

        async def kill_one() -> None:
            nonlocal restarted_at, unanswered_at_kill
            await killed.wait()
            unanswered_at_kill = len(cluster.acked[0] - set(answers(slack)[0]))
            await cluster.kill(0)
            report(
                f"SIGKILLed process 0 after {sent} of {total} questions,"
                f" {unanswered_at_kill} it had acked still unanswered"
            )
            await asyncio.sleep(3.0)
            await cluster.start(0)
            restarted_at = time.monotonic()
            report("process 0 serving again")

        started = time.monotonic()
        killer = asyncio.create_task(kill_one())
        await asyncio.gather(*(one_thread(t) for t in range(threads)))
        await killer
        waited = await wait_answered(slack, tokens, within=120.0)
        await asyncio.sleep(1.0)  # a second answer to a question would come now, if at all
        elapsed = time.monotonic() - started
        codes = await cluster.stop_all()
        counted, by_thread, stray = answers(slack)
        out_of_order = 0
        for found in by_thread.values():
            order = [token for _, token in sorted(found)]
            out_of_order += sum(1 for a, b in itertools.pairwise(order) if a > b)
        return {
            "processes": replicas,
            "questions": total,
            "deliveries": cluster.deliveries,
            "deliveries_refused": cluster.refused,
            "acked_unanswered_at_kill": unanswered_at_kill,
            "answered": sum(1 for token in tokens if counted[token] >= 1),
            "lost": sum(1 for token in tokens if counted[token] == 0),
            "duplicated": sum(counted[token] - 1 for token in tokens if counted[token] > 1),
            "out_of_order": out_of_order,
            "told_busy": sum(1 for text in stray if text.startswith(BUSY_REPLY[:20])),
            "stray_messages": len(stray),
            "stray_examples": stray[:5],
            "ack_ms_p50": round(percentile(cluster.ack_ms, 50) if cluster.ack_ms else 0.0, 1),
            "ack_ms_p99": round(percentile(cluster.ack_ms, 99) if cluster.ack_ms else 0.0, 1),
            "seconds": round(elapsed, 1),
            "seconds_after_last_delivery": round(waited, 1),
            "exit_codes": codes,
        }


async def throughput(
    folder: Path,
    *,
    postgres: bool,
    replicas: int,
    conversations: int = 100,
    model_delay: float = 0.2,
) -> dict[str, Any]:
    """The throughput scenario (module docstring) for one setup; returns its figures."""
    nonce = uuid.uuid4().hex[:6]
    async with (
        database(postgres) as url,
        FakeSlack() as slack,
        FakeLLMServer(echo_model(model_delay)) as llm,
        aiohttp.ClientSession() as http,
    ):
        cluster = Cluster(folder, environments(folder, slack, llm, url, replicas))
        await asyncio.gather(*(cluster.start(i) for i in range(replicas)))
        questions = [
            Question(
                token=f"q{c:04d}",
                channel=f"C{c:04d}T{nonce.upper()}",
                ts=f"1700001{c:03d}.000100",
                thread_ts=None,
                event_id=f"Ev{nonce}{c:04d}",
            )
            for c in range(conversations)
        ]
        started = time.perf_counter()
        sent = {q.token: time.perf_counter() for q in questions}
        await asyncio.gather(*(cluster.deliver(http, q, i % replicas) for i, q in enumerate(questions)))
        await wait_answered(slack, [q.token for q in questions], within=300.0)
        wall = time.perf_counter() - started
        await cluster.stop_all()
        latency: dict[str, float] = {}
        for call in slack.calls:
            if call.method not in ("chat.postMessage", "chat.update") or not call.ok:
                continue
            found = ANSWER.match(str(call.body.get("text") or ""))
            if found and found.group(1) in sent and found.group(1) not in latency:
                latency[found.group(1)] = call.at - sent[found.group(1)]
        values = list(latency.values())
        return {
            "answered": len(latency),
            "seconds": round(wall, 2),
            "answers_per_second": round(len(latency) / wall, 1) if wall else 0.0,
            "latency_s_p50": round(statistics.median(values), 2) if values else None,
            "latency_s_p95": round(percentile(values, 95), 2) if values else None,
        }


async def run(report: Callable[[str], None] = print) -> dict[str, Any]:
    """`python -m bench --only replicas`: exactly once with 3 processes, then throughput."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nerve-replicas-bench-") as tmp:
        folder = Path(tmp) / "exactly-once"
        folder.mkdir()
        out["exactly_once"] = await exactly_once(folder, report=report)
        out["exactly_once"].pop("stray_examples")
        for name, postgres, count in (
            ("sqlite_1", False, 1),
            ("postgres_1", True, 1),
            ("postgres_3", True, 3),
        ):
            folder = Path(tmp) / name
            folder.mkdir()
            out[f"throughput_{name}"] = await throughput(folder, postgres=postgres, replicas=count)
            report(f"throughput {name}: {out[f'throughput_{name}']}")
    return out

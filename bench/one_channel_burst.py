"""300 mentions in ONE Slack channel within 15 s, at Slack's own pace for posting in a channel.

Slack lets an app post about one message per second per channel (short bursts allowed). The local
fake of Slack enforces that pace here (`FakeSlack.pace_posts`: a post beyond it gets 429 with
Retry-After), so the figures are those of a real channel: 300 answers cannot take less than about
300 s. What nerve decides is everything else: how soon each mention shows a sign (👀 through
reactions.add, limited per workspace and not per channel), whether model work waits for anything
Slack paces, and whether every answer goes out once, in its own thread, as fast as the pace allows.

Everything runs on 127.0.0.1 through the real parts: signed Events API deliveries into bolt's aiohttp
adapter, the real agent and SQLite store with their default limits (16 turns at once, 100 waiting),
the `openai` client against a local model service (0.2–0.7 s per answer: the turns' slots keep up
with 20 mentions a second, so the channel's pace is what is measured), Slack's Web API faked on
another event loop so its CPU time is not charged to nerve.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from adapters.settings import Settings
from adapters.slack.app import build_bot
from adapters.slack.client import make_client
from adapters.slack.serve import serve_http
from bench.slack_bench import SECRET, _deliver, _Elsewhere, _mention, _NoTools
from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.turn.gate import BUSY_REPLY
from tests.fakes.llm_server import FakeLLMServer, Reply, own_text
from tests.fakes.slack_api import FakeSlack

CHANNEL = "C0BURST"
MENTIONS = 300
WINDOW = 15.0  # seconds over which the mentions arrive
PACE = 1.0  # seconds between two posts in one channel, as Slack allows
BURST = 2  # posts Slack takes at once after a quiet spell (the fake's token bucket)
SIGN_GOAL = 5.0  # seconds from a mention to its sign
ANSWER = re.compile(r"answer to question (\d+)")


def _model(asked: dict[int, float]) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        last = own_text([m for m in body["messages"] if m.get("role") == "user"][-1]["content"])
        number = int(str(last).removeprefix("question "))
        asked.setdefault(number, time.perf_counter())
        return Reply(content=f"answer to question {number}", delay=0.2 + (number * 7 % 6) * 0.1)

    return respond


def _quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


async def one_channel_burst(
    report: Callable[[str], None],
    folder: Path,
    *,
    mentions: int = MENTIONS,
    window: float = WINDOW,
    pace: float = PACE,
) -> dict[str, Any]:
    remote = _Elsewhere()
    asked: dict[int, float] = {}
    slack, llm = FakeSlack(), FakeLLMServer(_model(asked))
    await remote.run(slack.__aenter__())
    await remote.run(llm.__aenter__())
    slack.pace_posts(pace, burst=BURST)
    roots = [f"1700000005.{i:06d}" for i in range(mentions)]
    sent: dict[int, float] = {}
    started = time.perf_counter()

    def answers() -> list[str]:
        return [p.text for p in slack.posted if ANSWER.fullmatch(p.text)]

    def replied() -> int:
        """Mentions whose thread holds an answer or the busy notice."""
        finals = [p.thread_ts for p in slack.posted if ANSWER.fullmatch(p.text) or p.text == BUSY_REPLY]
        return len(set(finals))

    async def burst(url: str) -> list[float]:
        """The load generator, on the remote loop: mentions on schedule (an open loop), then the wait
        for every answer."""
        async with aiohttp.ClientSession() as http:
            return await send_all(http, url)

    async def send_all(http: aiohttp.ClientSession, url: str) -> list[float]:
        async def one(i: int) -> float:
            sent[i] = time.perf_counter()
            return await _deliver(http, url, _mention(f"EvBurst{i:05d}", CHANNEL, roots[i], f"question {i}"))

        tasks = []
        for i in range(mentions):
            await asyncio.sleep(max(0.0, started + i * window / mentions - time.perf_counter()))
            tasks.append(asyncio.create_task(one(i)))
        acks = list(await asyncio.gather(*tasks))
        await slack.wait_for(lambda _s: replied() >= mentions, within=mentions * pace * 2 + 120)
        return acks

    try:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            slack_bot_token=SecretStr("xoxb-bench"),
            slack_app_token=None,
            slack_signing_secret=SecretStr(SECRET),
            slack_api_base_url=slack.api_url,
        )
        store = await SQLiteStore.open(folder / "nerve.db")
        model = OpenAILLM(model="bench", base_url=llm.base_url, api_key=None, timeout=60, max_retries=0)
        agent = Agent(llm=model, host=_NoTools(), store=store, inbox=store, config=AgentConfig())
        session = aiohttp.ClientSession()
        bot = build_bot(agent, settings, client=make_client(settings, session=session), pace=pace)
        runner, url = await serve_http(bot, "127.0.0.1", 0)
        try:
            started = time.perf_counter()
            acks = await remote.run(burst(url))
            await bot.idle()
        finally:
            await bot.aclose()
            await runner.cleanup()
            await session.close()
            await model.aclose()
            await store.close()
    finally:
        await remote.run(llm.__aexit__(None, None, None))
        await remote.run(slack.__aexit__(None, None, None))
        remote.close()

    signs = {str(c.body["timestamp"]): c.at for c in slack.calls_of("reactions.add") if c.ok}
    sign_s = [signs.get(roots[i], float("inf")) - sent[i] for i in range(mentions)]
    model_wait_s = [asked.get(i, float("inf")) - sent[i] for i in range(mentions)]
    posted_at = {
        int(found.group(1)): call.at
        for call in slack.calls_of("chat.postMessage") + slack.calls_of("chat.update")
        if call.ok and (found := ANSWER.fullmatch(str(call.body.get("text") or "")))
    }
    answer_s = sorted(at - started for at in posted_at.values())
    counted = Counter(answers())
    misplaced = sum(
        1
        for i in range(mentions)
        if [p.text for p in slack.thread(CHANNEL, roots[i])] != [f"answer to question {i}"]
    )
    out = {
        "mentions": mentions,
        "window_s": window,
        "slack_pace_s": pace,
        "ack_p99_ms": round(_quantile(acks, 99), 1),
        "sign_p50_s": round(statistics.median(sign_s), 3),
        "sign_max_s": round(max(sign_s), 3),
        "sign_goal_met": max(sign_s) <= SIGN_GOAL,
        "model_wait_max_s": round(max(model_wait_s), 3),
        "answers": len(counted),
        "told_busy": sum(1 for p in slack.posted if p.text == BUSY_REPLY),
        "lost": mentions - replied(),
        "duplicated": sum(n - 1 for n in counted.values()),
        "misplaced": misplaced,
        "first_answer_s": round(answer_s[0], 1) if answer_s else None,
        "last_answer_s": round(answer_s[-1], 1) if answer_s else None,
        "answers_per_s": round((len(answer_s) - 1) / (answer_s[-1] - answer_s[0]), 2)
        if len(answer_s) > 1
        else None,
        "status_posts": sum(
            1
            for c in slack.calls_of("chat.postMessage")
            if c.ok and not ANSWER.fullmatch(str(c.body.get("text")))
        ),
        "posts_refused_429": slack.paced_refusals,
        "reactions_left": sum(1 for ts in roots if slack.reacted(CHANNEL, ts)),
    }
    report(
        f"one channel, {mentions} mentions in {window:g} s at Slack's pace ({pace:g} s/post): sign p50 "
        f"{out['sign_p50_s']} s, max {out['sign_max_s']} s (goal ≤ {SIGN_GOAL:g} s); model waited at most "
        f"{out['model_wait_max_s']} s; {out['answers']} answers, lost {out['lost']}, duplicated "
        f"{out['duplicated']}, misplaced {out['misplaced']}; last answer after {out['last_answer_s']} s "
        f"({out['answers_per_s']}/s); {out['posts_refused_429']} posts refused with 429"
    )
    return out

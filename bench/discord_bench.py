"""Discord adapter benchmark: /ask defer latency under a slow model, and many conversations at once.

Everything runs on 127.0.0.1: the real discord.py client against the fake Discord, the real Agent
and SQLite store, and the real OpenAI client against the fake model service.

1. Defer latency: 20 `/ask` at once while the model takes 2 s per answer. Goal: p99 < 1 s (Discord
   drops interactions not acknowledged within 3 s).
2. Throughput and ordering: 50 DM conversations × 5 turns, each user sending all five turns
   without waiting. Every reply must arrive exactly once, in its conversation, in turn order —
   checked against what the fake Discord recorded.

Run: `python -m bench.discord_bench`.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.agent import Agent
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import CallContext, ToolResult, ToolSpec
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, Step, own_text, reply

ASKS = 20
MODEL_DELAY = 2.0
CONVERSATIONS = 50
TURNS = 5
TIME_LIMIT = 120.0


class NoTools:
    def list_tools(self) -> list[ToolSpec]:
        return []

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        raise AssertionError("no tools in this benchmark")

    def starting(self) -> list[str]:
        return []


def _last_user_text(body: dict[str, Any]) -> str:
    return next(own_text(m["content"]) for m in reversed(body["messages"]) if m["role"] == "user")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _defer_latency(store: SQLiteStore) -> dict[str, float]:
    def slow(body: dict[str, Any]) -> Step:
        return reply(f"answer to {_last_user_text(body)}", delay=MODEL_DELAY)

    async with FakeDiscord() as fake, FakeLLMServer(slow) as model:
        llm = OpenAILLM(model="bench", base_url=model.base_url, api_key=None, timeout=30, max_retries=0)
        agent = Agent(llm=llm, host=NoTools(), store=store, inbox=store)
        try:
            async with running_bot(fake, agent):
                loop = asyncio.get_running_loop()
                sent: dict[str, float] = {}
                for i in range(ASKS):
                    user = fake.user(f"asker{i}")
                    interaction = await fake.slash(
                        user, "ask", {"question": f"q{i}"}, channel_id=fake.channel_id
                    )
                    sent[interaction["id"]] = loop.time()
                callbacks = await fake.wait_for(
                    "POST", r"/interactions/\d+/[^/]+/callback", count=ASKS, within=30
                )
                latencies = [r.at - sent[r.path.split("/")[2]] for r in callbacks]
                await fake.wait_for("POST", r"/channels/\d+/messages/\d+/threads", count=ASKS, within=60)
        finally:
            await llm.aclose()
    return {
        "defer_p50_ms": statistics.median(latencies) * 1000,
        "defer_p99_ms": _percentile(latencies, 0.99) * 1000,
        "defer_max_ms": max(latencies) * 1000,
    }


async def _conversations(store: SQLiteStore) -> dict[str, float]:
    rng = random.Random(7)

    async def echo(body: dict[str, Any]) -> Step:
        # Random small delays shuffle completion order across conversations.
        return reply(f"reply to {_last_user_text(body)}", delay=rng.uniform(0.0, 0.05))

    async with FakeDiscord() as fake, FakeLLMServer(echo) as model:
        llm = OpenAILLM(model="bench", base_url=model.base_url, api_key=None, timeout=30, max_retries=0)
        agent = Agent(llm=llm, host=NoTools(), store=store, inbox=store)
        try:
            async with running_bot(fake, agent):
                users = [fake.user(f"user{c}") for c in range(CONVERSATIONS)]
                started = time.perf_counter()
                for turn in range(TURNS):
                    for c, user in enumerate(users):
                        await fake.user_dms(user, f"c{c} t{turn}")
                expected = CONVERSATIONS * TURNS
                await fake.wait_until(
                    lambda: len(fake.find("POST", r"/channels/\d+/messages")) >= expected, within=90
                )
                elapsed = time.perf_counter() - started
        finally:
            await llm.aclose()
    lost = duplicated = out_of_order = misplaced = 0
    for c, user in enumerate(users):
        got = [m["content"] for m in fake.bot_messages(fake.dm_channels[user.id])]
        want = [f"reply to c{c} t{t}" for t in range(TURNS)]
        lost += sum(1 for w in want if w not in got)
        duplicated += len(got) - len(set(got))
        misplaced += sum(1 for g in got if not re.fullmatch(rf"reply to c{c} t\d", g))
        present = [g for g in got if g in want]
        out_of_order += int(present != sorted(present, key=want.index))
    return {
        "turns": float(CONVERSATIONS * TURNS),
        "seconds": elapsed,
        "turns_per_second": CONVERSATIONS * TURNS / elapsed,
        "lost": float(lost),
        "duplicated": float(duplicated),
        "out_of_order_conversations": float(out_of_order),
        "misplaced": float(misplaced),
    }


async def run() -> dict[str, Any]:
    """Both scenarios, each on a fresh store; bounded by TIME_LIMIT overall."""
    async with asyncio.timeout(TIME_LIMIT):
        with tempfile.TemporaryDirectory() as tmp:
            store = await SQLiteStore.open(Path(tmp) / "defer.db")
            try:
                defer = await _defer_latency(store)
            finally:
                await store.close()
            store = await SQLiteStore.open(Path(tmp) / "load.db")
            try:
                load = await _conversations(store)
            finally:
                await store.close()
    return {"defer": defer, "conversations": load, "defer_goal_met": defer["defer_p99_ms"] < 1000}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run()), indent=2))

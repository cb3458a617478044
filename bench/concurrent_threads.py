"""50 Slack threads × 5 turns at once, the model taking 2–8 s per answer, and one thread whose model
answers in 0.2 s: nothing lost, doubled or out of order, and the quick thread is never held up by
the slow ones.

Each thread lives in a channel of its own (so Slack's pace of posts per channel, about one a second,
is no shared bottleneck) and sends its five turns back to back; each turn must be answered once, in
its thread, in the order sent. nerve runs with NERVE_MAX_CONCURRENT_TURNS at least the number of
threads: with fewer slots than threads, turns wait their turn for a slot in arrival order by design
(the burst scenario measures that), and the question here is whether one conversation ever waits
for another.

`hold_first_turns` makes the quick thread's freedom a fact rather than a timing: the model holds the
first answer of every other thread until the quick thread has all five of its answers. Were any
thread to wait for another (a shared lock, a queue in front of the model), the quick thread could
never finish and the scenario would time out. The test uses it with the model's times scaled down.
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.slack_bench import _deliver, _mention
from bench.slack_load import ModelMeter, slack_load_rig
from bot.agent import AgentConfig
from tests.fakes.llm_server import own_text

QUICK = 0  # the thread whose model answers quickly
QUESTION = re.compile(r"^t(\d+)-k(\d+)$")
ANSWER = re.compile(r"^answer to t(\d+)-k(\d+)$")


def channel(t: int) -> str:
    return f"C0THR{t:03d}"


def root(t: int) -> str:
    return f"1700000010.{t:06d}"


async def concurrent_threads(
    folder: Path,
    *,
    threads: int = 50,
    turns: int = 5,
    slow: tuple[float, float] = (2.0, 8.0),
    quick: float = 0.2,
    pace: float = 1.0,
    hold_first_turns: bool = False,
    seed: int = 50,
    slots: int | None = None,
    within: float = 300.0,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    rng = random.Random(seed)
    delays = {(t, k): rng.uniform(*slow) for t in range(threads) for k in range(turns)}
    quick_done = asyncio.Event()  # on the model's loop: set once the quick thread has every answer

    async def think(body: dict[str, Any]) -> tuple[str, float]:
        asked = [own_text(m.get("content")) for m in body["messages"] if m.get("role") == "user"][-1]
        found = QUESTION.match(asked)
        assert found, f"unexpected question {asked!r}"
        t, k = int(found.group(1)), int(found.group(2))
        if t == QUICK:
            return f"answer to {asked}", quick
        if hold_first_turns and k == 0:
            await quick_done.wait()
        return f"answer to {asked}", delays[(t, k)]

    meter = ModelMeter(think)
    # NERVE_MAX_CONCURRENT_TURNS: at least one slot per thread unless `slots` says otherwise.
    slots = slots or max(16, threads)
    config = AgentConfig(max_concurrent_turns=slots, turn_queue=max(100, threads * turns))
    started = time.perf_counter()
    async with slack_load_rig(folder, meter, config=config, pace=pace, status_interval=pace) as rig:
        slack = rig.slack
        sent_at: dict[int, float] = {}

        def answers_in(t: int) -> list[tuple[int, int]]:
            return [
                (int(m.group(1)), int(m.group(2)))
                for p in slack.thread(channel(t), root(t))
                if (m := ANSWER.match(p.text))
            ]

        async def one_thread(http: aiohttp.ClientSession, t: int) -> None:
            sent_at[t] = time.perf_counter()
            for k in range(turns):
                ts = root(t) if k == 0 else f"1700000011.{t * 100 + k:06d}"
                body = _mention(f"EvThr{t:03d}-{k}", channel(t), ts, f"t{t}-k{k}", root(t) if k else None)
                await _deliver(http, rig.url, body)

        async def work(http: aiohttp.ClientSession) -> None:
            async def release_when_quick_is_done() -> None:
                await slack.wait_for(lambda _s: len(answers_in(QUICK)) >= turns, within=within)
                quick_done.set()

            watcher = asyncio.create_task(release_when_quick_is_done())
            await asyncio.gather(*(one_thread(http, t) for t in range(threads)))
            await slack.wait_for(
                lambda _s: all(len(answers_in(t)) >= turns for t in range(threads)), within=within
            )
            await watcher

        await rig.elsewhere(work)
        await rig.bot.idle()
        wall = time.perf_counter() - started

        answered_at: dict[tuple[int, int], float] = {}
        for call in slack.calls_of("chat.postMessage") + slack.calls_of("chat.update"):
            found = ANSWER.match(str(call.body.get("text") or ""))
            if call.ok and found:
                answered_at.setdefault((int(found.group(1)), int(found.group(2))), call.at)
        lost = duplicated = out_of_order = misplaced = 0
        took: dict[int, float] = {}
        for t in range(threads):
            mine = answers_in(t)
            numbers = [k for owner, k in mine if owner == t]
            misplaced += len(mine) - len(numbers)
            lost += len(set(range(turns)) - set(numbers))
            duplicated += len(numbers) - len(set(numbers))
            out_of_order += int(numbers != sorted(numbers))
            last = max((answered_at.get((t, k), 0.0) for k in range(turns)), default=0.0)
            took[t] = last - sent_at[t]
        others = [took[t] for t in range(threads) if t != QUICK]
        peak_turns = meter.peak

    out = {
        "threads": threads,
        "turns": threads * turns,
        "model_s": f"{slow[0]:g}–{slow[1]:g}",
        "quick_model_s": quick,
        "max_concurrent_turns": slots,
        "first_turns_held_until_quick_done": hold_first_turns,
        "lost": lost,
        "duplicated": duplicated,
        "out_of_order_threads": out_of_order,
        "misplaced": misplaced,
        "quick_thread_s": round(took[QUICK], 2),
        "quick_thread_ideal_s": round(turns * quick, 2),
        "other_threads_median_s": round(statistics.median(others), 1),
        "other_threads_min_s": round(min(others), 1),
        "other_threads_max_s": round(max(others), 1),
        "model_requests": meter.requests,
        "model_requests_at_once_peak": peak_turns,
        "wall_s": round(wall, 1),
    }
    out["goal_met"] = lost == duplicated == out_of_order == misplaced == 0 and took[QUICK] < min(others)
    report(
        f"{threads} threads × {turns} turns, model {out['model_s']} s (thread {QUICK}: {quick:g} s): lost "
        f"{lost}, duplicated {duplicated}, out of order {out_of_order}, misplaced {misplaced}; the quick "
        f"thread took {out['quick_thread_s']} s for its {turns} turns, the others "
        f"{out['other_threads_min_s']}–{out['other_threads_max_s']} s (median "
        f"{out['other_threads_median_s']} s); {meter.peak} model "
        f"requests at once at most; {out['wall_s']} s"
    )
    return out


async def run(report: Callable[[str], None] = print) -> dict[str, Any]:
    """`python -m bench --only threads`: the model's real 2–8 s, with a turn slot per thread, then
    with the default 16 slots (where turns wait for a slot in arrival order, by design)."""
    with tempfile.TemporaryDirectory(prefix="nerve-threads-bench-") as tmp:
        async with asyncio.timeout(600):
            return {
                "slot_per_thread": await concurrent_threads(Path(tmp) / "a", report=report),
                "default_16_slots": await concurrent_threads(Path(tmp) / "b", slots=16, report=report),
            }

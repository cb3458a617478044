"""A burst of 300 Slack mentions within 15 s across many channels: every mention is answered or told
"busy", the queue of waiting turns stays within NERVE_TURN_QUEUE, the model never works on more
than NERVE_MAX_CONCURRENT_TURNS requests at once, and every delivery is acked quickly.

The load leaves on schedule (an open loop, as Slack sends), each mention a new thread in one of
`channels` channels. nerve runs with its default limits (16 turns at once, 100 waiting) and its
real pace of posts per channel; the model takes `model_s` per answer, so 300 mentions in 15 s are
more than 16 slots can answer in time and the rest must hear "busy" at once rather than wait in
silence. Counted at the fakes: the model's requests at once (`ModelMeter`), and every Slack post;
the queue's depth is sampled inside nerve (`TurnGate.waiting`) every few milliseconds.

`bench/one_channel_burst.py` is the same burst in ONE channel, where Slack's pace is the limit.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.slack_bench import _deliver, _mention
from bench.slack_load import ModelMeter, quantile, slack_load_rig
from bot.agent import AgentConfig
from bot.turn.gate import BUSY_REPLY
from tests.fakes.llm_server import own_text

QUESTION = re.compile(r"^question (\d+)$")
ANSWER = re.compile(r"^answer to question (\d+)$")
ACK_GOAL_MS = 300.0


async def many_channel_burst(
    folder: Path,
    *,
    mentions: int = 300,
    window: float = 15.0,
    channels: int = 30,
    model_s: float = 2.0,
    slots: int = 16,
    queue: int = 100,
    pace: float = 1.0,
    within: float = 240.0,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    async def think(body: dict[str, Any]) -> tuple[str, float]:
        asked = [own_text(m.get("content")) for m in body["messages"] if m.get("role") == "user"][-1]
        assert QUESTION.match(asked), f"unexpected question {asked!r}"
        return f"answer to {asked}", model_s

    meter = ModelMeter(think)
    config = AgentConfig(max_concurrent_turns=slots, turn_queue=queue)
    started = time.perf_counter()
    async with slack_load_rig(folder, meter, config=config, pace=pace, status_interval=pace) as rig:
        slack = rig.slack
        where = {i: (f"C0BRST{i % channels:03d}", f"1700000020.{i:06d}") for i in range(mentions)}
        gate = rig.agent.gate
        deepest = 0
        busiest = 0

        async def sample_gate() -> None:
            nonlocal deepest, busiest
            while True:
                deepest, busiest = max(deepest, gate.waiting), max(busiest, gate.running)
                await asyncio.sleep(0.005)

        def replies(i: int) -> list[str]:
            return [p.text for p in slack.thread(*where[i])]

        def settled(_slack: Any) -> bool:
            return all(
                any(text == BUSY_REPLY or ANSWER.match(text) for text in replies(i)) for i in range(mentions)
            )

        async def work(http: aiohttp.ClientSession) -> list[float]:
            begun = time.perf_counter()
            tasks = []
            for i in range(mentions):
                # Open loop: mentions leave on schedule whether or not earlier ones were acked.
                await asyncio.sleep(max(0.0, begun + i * window / mentions - time.perf_counter()))
                channel, ts = where[i]
                body = _mention(f"EvBurst{i:05d}", channel, ts, f"question {i}")
                tasks.append(asyncio.create_task(_deliver(http, rig.url, body)))
            acks = list(await asyncio.gather(*tasks))
            await slack.wait_for(settled, within=within)
            return acks

        sampler = asyncio.create_task(sample_gate())
        try:
            acks = await rig.elsewhere(work)
            await rig.bot.idle()
        finally:
            sampler.cancel()
        wall = time.perf_counter() - started

        answered = busy = lost = duplicated = misplaced = 0
        for i in range(mentions):
            texts = replies(i)
            numbers = [int(m.group(1)) for text in texts if (m := ANSWER.match(text))]
            told = texts.count(BUSY_REPLY)
            misplaced += sum(1 for n in numbers if n != i)
            mine = numbers.count(i)
            answered += int(mine > 0)
            busy += int(told > 0 and mine == 0)
            lost += int(mine == 0 and told == 0)
            duplicated += max(0, mine + told - 1)
        posted_texts = Counter(p.text for p in slack.posted)

    out = {
        "mentions": mentions,
        "window_s": window,
        "channels": channels,
        "model_s": model_s,
        "max_concurrent_turns": slots,
        "turn_queue": queue,
        "answered": answered,
        "told_busy": busy,
        "lost": lost,
        "duplicated": duplicated,
        "misplaced": misplaced,
        "queue_depth_peak": deepest,
        "turns_running_peak": busiest,
        "model_requests": meter.requests,
        "model_requests_at_once_peak": meter.peak,
        "ack_p50_ms": round(statistics.median(acks), 1),
        "ack_p99_ms": round(quantile(acks, 99), 1),
        "ack_max_ms": round(max(acks), 1),
        "queued_notices": sum(n for text, n in posted_texts.items() if text.startswith("Busy with other")),
        "wall_s": round(wall, 1),
    }
    out["goal_met"] = (
        lost == duplicated == misplaced == 0
        and answered + busy == mentions
        and deepest <= queue
        and meter.peak <= slots
        and out["ack_p99_ms"] <= ACK_GOAL_MS
    )
    report(
        f"{mentions} mentions in {window:g} s over {channels} channels, model {model_s:g} s, {slots} turns "
        f"at once + {queue} waiting: answered {answered}, told busy {busy}, lost {lost}, duplicated "
        f"{duplicated}; queue peak {deepest}, model requests at once peak {meter.peak}; ack p50 "
        f"{out['ack_p50_ms']} ms, p99 {out['ack_p99_ms']} ms, max {out['ack_max_ms']} ms (goal p99 ≤ "
        f"{ACK_GOAL_MS:g} ms); {out['wall_s']} s"
    )
    return out


async def run(report: Callable[[str], None] = print) -> dict[str, Any]:
    """`python -m bench --only burst`: 300 mentions in 15 s over 30 channels, the model 2 s."""
    with tempfile.TemporaryDirectory(prefix="nerve-burst-bench-") as tmp:
        async with asyncio.timeout(600):
            return await many_channel_burst(Path(tmp), report=report)

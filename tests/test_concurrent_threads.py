"""50 Slack threads × 5 turns at once: 0 lost, 0 duplicated, 0 out of order, and one quick thread
is never held up by the slow ones.

The model's times are scaled down tenfold from the issue's 2–8 s (0.2–0.8 s; the quick thread's
0.2 s becomes 0.02 s) and so is Slack's pace of posts per channel (0.1 s), so the test takes
seconds; `make bench` runs the real times (`bench/concurrent_threads.py`). Whether a slow thread
blocks the quick one is not judged by a stopwatch: the model holds the first answer of all 49 other
threads until the quick thread has its five answers, so any wait of one conversation for another
would hang the test until its time limit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench.concurrent_threads import concurrent_threads
from tests.fakes.llm_server import Reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import mention, rig, user_texts

CHANNEL = "C0ORDER"


async def test_fifty_threads_of_five_turns_lose_double_and_reorder_nothing_and_never_wait_for_each_other(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    figures = await concurrent_threads(
        tmp_path,
        slow=(0.2, 0.8),
        quick=0.02,
        pace=0.1,
        hold_first_turns=True,
        within=90,
        report=lines.append,
    )
    shown = f"{lines}\n{figures}"
    assert figures["turns"] == 250
    assert figures["lost"] == 0, shown
    assert figures["duplicated"] == 0, shown
    assert figures["out_of_order_threads"] == 0, shown
    assert figures["misplaced"] == 0, shown
    # All 49 held model calls were in flight while the quick thread finished: nothing queued them.
    assert figures["model_requests_at_once_peak"] >= 50, shown
    assert figures["model_requests"] == 250, shown


async def test_a_turn_waiting_behind_another_in_its_thread_never_shows_above_its_answer(
    tmp_path: Path,
) -> None:
    """Turns of one thread are answered in order, and a person reads them in order: a turn that waits
    for the one before it opens no live message ("Thinking…") above that turn's answer."""
    release = asyncio.Event()

    async def model(body: dict[str, Any]) -> Reply:
        asked = user_texts(body)[-1]
        if asked == "first":
            await release.wait()
        return Reply(content=f"answer to {asked}")

    root = "1600000000.900001"
    async with rig(tmp_path, model, pace=0.3, status_interval=0.3) as r:

        def texts() -> list[str]:
            return [p.text for p in r.slack.thread(CHANNEL, root)]

        assert await r.deliver(mention(f"<@{BOT_USER_ID}> first", channel=CHANNEL, ts=root)) == 200
        await r.slack.wait_for(lambda _s: texts() == ["Thinking…"])
        # While the channel's pace slot is taken by that live message, the second turn arrives…
        second = mention(f"<@{BOT_USER_ID}> second", channel=CHANNEL, thread_ts=root)
        assert await r.deliver(second) == 200
        # …and once the slot is free again, the third.
        await asyncio.sleep(0.5)
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> third", channel=CHANNEL, thread_ts=root)) == 200
        await asyncio.sleep(0.5)  # room for a live message of a waiting turn to show, if one would
        release.set()
        await r.slack.wait_for(lambda _s: sum(t.startswith("answer to") for t in texts()) == 3)
        await r.settle()
        assert texts() == ["answer to first", "answer to second", "answer to third"]

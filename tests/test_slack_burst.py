"""A burst of 300 Slack mentions across 30 channels: every mention is answered or told "busy", the
queue stays bounded, the model never works on more requests at once than there are turn slots, and
every delivery is acked well within Slack's 3 s.

The issue's 300 events in 15 s, scaled so the test takes seconds: the model takes 0.6 s, nerve has
4 turn slots and 20 places in the queue (the defaults are 16 and 100) and posts at one per 50 ms
per channel (Slack: about one a second). That is three times the load the slots can carry, so the
busy path is taken. (The arrival rate is the issue's own: a faster burst measures how busy the test
machine is rather than nerve.) That the ack never waits on a turn is shown by cause in
`tests/test_slack_http.py` (acked while the model is held); here the median ack is held to Slack's
3 s, which an ack that waited on turns would miss by far (the later mentions of the burst wait tens
of seconds for a slot) and which a busy machine keeps with room to spare. A single slowest ack is
the machine's, not nerve's: the issue's goal of p99 ≤ 300 ms is measured by `make bench` on the
full-size burst (`bench/many_channel_burst.py`), whose harness this test shares.
"""

from __future__ import annotations

from pathlib import Path

from bench.many_channel_burst import many_channel_burst

SLOTS, QUEUE = 4, 20


async def test_300_mentions_in_many_channels_are_each_answered_or_told_busy_within_bounds(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    figures = await many_channel_burst(
        tmp_path,
        mentions=300,
        window=15.0,
        channels=30,
        model_s=0.6,
        slots=SLOTS,
        queue=QUEUE,
        pace=0.05,
        within=90,
        report=lines.append,
    )
    shown = f"{lines}\n{figures}"
    assert figures["answered"] + figures["told_busy"] == 300, shown
    assert figures["lost"] == 0 and figures["duplicated"] == 0 and figures["misplaced"] == 0, shown
    assert figures["told_busy"] > 0, "the burst never filled the queue: the busy path went untested"
    assert figures["answered"] > SLOTS + QUEUE, shown
    assert figures["queue_depth_peak"] <= QUEUE, shown
    assert figures["turns_running_peak"] <= SLOTS, shown
    assert figures["model_requests_at_once_peak"] <= SLOTS, shown
    assert figures["model_requests"] == figures["answered"], "a busy mention never reaches the model"
    assert figures["ack_p50_ms"] < 3000, shown

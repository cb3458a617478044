"""Faults, load and abuse: the bounded load scenarios whose figures `bench/RESULTS.md` keeps.

`python -m bench --only faults` runs every scenario below; each returns its figures, and must-be-
zero counts (`lost`, `duplicated`, `misplaced`) and `*_goal_met` flags are judged by `bench`.

* one_channel — 300 mentions in ONE Slack channel within 15 s at Slack's real posting pace
  (`bench/one_channel_burst.py`; about 5 minutes, the pace allows no less).
* stubborn_shutdown — SIGTERM with a 1 s grace and an MCP server that ignores its stdin closing and
  SIGTERM: nerve exits within the grace plus one second, the server killed (`bench/stubborn_shutdown.py`).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.one_channel_burst import MENTIONS, PACE, one_channel_burst
from bench.stubborn_shutdown import stubborn_shutdown

# The whole suite, so a regression cannot hang `make bench`.
TIME_LIMIT = MENTIONS * PACE * 2 + 300


async def run(report: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every scenario; `report` receives one line per scenario. Returns the figures."""
    with tempfile.TemporaryDirectory(prefix="nerve-faults-bench-") as tmp:
        async with asyncio.timeout(TIME_LIMIT):
            return {
                "stubborn_shutdown": await stubborn_shutdown(report, Path(tmp)),
                "one_channel": await one_channel_burst(report, Path(tmp)),
            }


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.ERROR)
    print(json.dumps(asyncio.run(run()), indent=2))

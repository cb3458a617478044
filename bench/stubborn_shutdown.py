"""SIGTERM with an MCP server that will not stop: how long past NERVE_SHUTDOWN_GRACE nerve exits.

`nerve slack` (HTTP mode, against the local Slack and model fakes) runs with a 1 s grace and one
stdio server that ignores both its stdin closing and SIGTERM (`tests/mcp_servers/garbled.py` with
GARBLED_STUBBORN=1); a turn is running (its model answers after 60 s), so the whole grace is used
and the turn is cut off. Goal: the process exits within the grace plus one second, no server left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.test_deploy import gone
from tests.test_server_stop import stopped_with_a_stubborn_server

GRACE = 1.0
GOAL_PAST_GRACE = 1.0
ROUNDS = 3


async def stubborn_shutdown(report: Callable[[str], None], tmp: Path) -> dict[str, Any]:
    """ROUNDS starts and SIGTERMs; the worst round's figures."""
    past: list[float] = []
    left = 0
    # The fake model, still holding the cut-off turn's request when nerve hangs up, would log that
    # at ERROR here: noise of the fake's, not a figure.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    for round_number in range(ROUNDS):
        folder = tmp / f"stubborn-{round_number}"
        folder.mkdir()
        took, _, pid, _ = await stopped_with_a_stubborn_server(folder, GRACE, busy=True)
        past.append(took - GRACE)
        left += not gone(pid)
    worst = max(past)
    report(f"stubborn_shutdown: exit {worst:.2f} s past a {GRACE:g} s grace (worst of {ROUNDS}), {left} left")
    return {
        "grace_s": GRACE,
        "exit_past_grace_s_worst": round(worst, 3),
        "exit_past_grace_goal_met": worst <= GOAL_PAST_GRACE,
        "servers_left": left,
        "lost": left,
    }

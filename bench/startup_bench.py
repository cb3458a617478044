"""How long a one-shot `nerve ask` takes from start to exit, as a multiple of loading its libraries.

The command: `nerve ask` with the built-in offline model and the two seed servers of `mcp.json`,
timed from the process's start to its exit (imports, store, both servers started and stopped, one
answer with a tool call). The yardstick: `python -c "import openai, mcp"` in the same environment.
They run in turn (A B A B …) and the ratio is taken pair by pair, so a machine whose speed drifts
during the run moves both sides of each ratio alike. The goal: a median ratio of 1.5 or less —
nerve's own imports and the servers' start-up overlap instead of adding up.

Run it alone with `python -m bench --only startup`, or `python bench/startup_bench.py` from a
checkout to measure that checkout's code.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = 9
GOAL = 1.5
QUESTION = "What is the air quality in A1001?"
YARDSTICK = ("-c", "import openai, mcp")


def ask_argv() -> list[str]:
    """`nerve ask …` through the console script of the running environment."""
    script = Path(sys.executable).with_name("nerve")
    return [str(script), "ask", QUESTION]


def ask_env(db: Path) -> dict[str, str]:
    """The offline model, the seed servers, a store of its own: nothing from `.env` or the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_"))}
    env.update(
        NERVE_MODEL="offline",
        NERVE_MCP_CONFIG=str(ROOT / "mcp.json"),
        NERVE_DB=str(db),
    )
    return env


async def wall_seconds(argv: list[str], env: dict[str, str], *, expect: str = "") -> float:
    """One run from start to exit; raises if it failed or did not print `expect`."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    elapsed = time.perf_counter() - started
    if process.returncode != 0 or expect not in out.decode(errors="replace"):
        raise RuntimeError(f"{argv[0]} exited {process.returncode}: {err.decode(errors='replace')[-500:]}")
    return elapsed


async def run(runs: int = RUNS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nerve-startup-") as scratch:
        env = ask_env(Path(scratch) / "nerve.db")
        yardstick = [sys.executable, *YARDSTICK]
        # One of each not counted: the first run pays for cold files and compiled bytecode.
        await wall_seconds(ask_argv(), env, expect="AQI")
        await wall_seconds(yardstick, env)
        asks: list[float] = []
        imports: list[float] = []
        for _ in range(runs):
            asks.append(await wall_seconds(ask_argv(), env, expect="AQI"))
            imports.append(await wall_seconds(yardstick, env))
    ratios = [a / b for a, b in zip(asks, imports, strict=True)]
    ratio = statistics.median(ratios)
    return {
        "runs": runs,
        "ask_wall_s": {"min": round(min(asks), 3), "median": round(statistics.median(asks), 3)},
        "import_openai_mcp_wall_s": {
            "min": round(min(imports), 3),
            "median": round(statistics.median(imports), 3),
        },
        "ratio": {"min": round(min(ratios), 2), "median": round(ratio, 2), "goal": f"≤ {GOAL}"},
        "ratio_goal_met": ratio <= GOAL,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run()), indent=2))

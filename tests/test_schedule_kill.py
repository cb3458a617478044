"""nerve SIGKILLed at 20 random moments around the due slots of 10 schedules, on its SQLite store:
every slot up to the end is run exactly once (none missed within the grace, none failed, none run
twice), and each slot's turn is stored once: one user message with the slot's delivery id, and one
answer to it. The runs a kill cut off are handed on by the next process and answered once.

The nerve processes (tests/scheduled_turns_proc.py) build the runtime as `nerve chat` does, against
the fake model service over the real client, and run real scheduled turns with the agent's schedule
runner, on a clock that runs SPEED times fast: a schedule every five minutes comes due every few
seconds. The turn lock's lease is the shortest allowed, so a killed process's runs are handed on soon;
the grace covers every restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config import MIN_TURN_LEASE
from bot.schedules import timing
from bot.store.sqlite import SQLiteStore
from bot.types import Schedule
from tests.fakes.llm_server import FakeLLMServer, Reply, own_text
from tests.test_terminal_schedules import a_schedule

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "scheduled_turns_proc.py"

KILLS = 20
SEED = 23
MINUTE = 60.0
# Fake seconds a real second: a schedule every 5 minutes is due every 6 s, while a killed
# process's turn lock lapses after 2 s (a fake 100 s; nerve's own lease is 20 s, for schedules at
# least 300 s apart). A schedule's slot not yet claimed when its next one comes due is recorded missed
# (never two runs in a burst): the runs a kill holds up must be under way again well before that.
SPEED = 50.0
# Real seconds between two looks of a runner at the schedules.
CADENCE = 0.05
BASE = datetime(2027, 1, 15, 9, 0, tzinfo=UTC).timestamp()
# The span whose slots are checked ends at least this long (fake) after BASE, so that the three
# schedules that run once are in it.
AT_LEAST = 30 * MINUTE
# Seconds (fake) after its slot a run may still start or be handed on: nerve's default, an hour, is
# over a minute of real time here, far more than a restart takes; so no slot may be missed.
GRACE = 3600.0
# Generous bounds on what a live process does (real seconds): a start, a run, the last slots.
LIVENESS = 60.0
EVERY_5 = "FREQ=MINUTELY;INTERVAL=5"
EVERY_10 = "FREQ=MINUTELY;INTERVAL=10"


def the_schedules() -> list[Schedule]:
    """Ten schedules of five people in the terminal: seven recurring, three once. A person's share
    their conversation, whose turns go one at a time, and come due a minute apart: within the time
    a killed process's turn holds the conversation, so the next one's turn may come before the turn
    the kill cut off goes on."""
    made = [
        ("ann", "ANN-1 check the air in A1001", 1, EVERY_5),
        ("ann", "ANN-2 post the AQI", 2, EVERY_5),
        ("ann", "ANN-3 ask whether the deploy finished", 12, ""),
        ("bob", "BOB-1 water the plants", 3, EVERY_5),
        ("bob", "BOB-2 sum up the tickets", 4, EVERY_10),
        ("bob", "BOB-3 call the lab", 21, ""),
        ("cid", "CID-1 check the backups", 5, EVERY_5),
        ("cid", "CID-2 read the queue", 6, EVERY_5),
        ("dee", "DEE-1 look at the build", 7, EVERY_5),
        ("eve", "EVE-1 book the room", 27, ""),
    ]
    return [a_schedule(login, prompt, BASE + minutes * MINUTE, rule) for login, prompt, minutes, rule in made]


def slots_up_to(schedules: list[Schedule], end: float) -> list[tuple[str, float]]:
    return [
        (schedule.id, slot)
        for schedule in schedules
        for slot in timing.slots_between(schedule.first_at, schedule.rule, schedule.timezone, 0.0, end)
    ]


def event_id(schedule_id: str, slot: float) -> str:
    """The delivery id `Agent.run_scheduled` gives a slot's turn."""
    return f"schedule:{schedule_id}:{slot:.0f}"


@dataclass(frozen=True)
class FastClock:
    """The nerve processes' clock: BASE when the harness was ready, SPEED times faster than time."""

    real0: float = field(default_factory=time.time)

    def now(self) -> float:
        return BASE + (time.time() - self.real0) * SPEED

    def real_at(self, fake: float) -> float:
        return self.real0 + (fake - BASE) / SPEED


class Nerves:
    """The harness: starts nerve processes, each a real process the test SIGKILLs; what they print."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self._process = process
        self._log = log
        self.lines: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())
        self.live: set[int] = set()
        self.clock = FastClock()

    async def _read(self) -> None:
        """Every line the harness prints; when the output ends or cannot be read, a waiter is woken
        at once (it says why) instead of waiting out LIVENESS."""
        assert self._process.stdout is not None
        try:
            async for raw in self._process.stdout:
                async with self._changed:
                    self.lines.append(json.loads(raw))
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(self, check: Callable[[dict[str, Any]], bool], *, what: str) -> dict[str, Any]:
        """The first line that passes `check`, waited for; fails saying `what` after LIVENESS."""

        def found() -> dict[str, Any] | None:
            return next(filter(check, self.lines), None)

        try:
            async with asyncio.timeout(LIVENESS), self._changed:
                await self._changed.wait_for(lambda: found() is not None or self._reader.done())
        except TimeoutError:
            raise AssertionError(f"no sign of {what} within {LIVENESS:g} s (see {self._log})") from None
        line = found()
        if line is None and self._reader.done() and not self._reader.cancelled():
            failure = self._reader.exception()
            assert failure is None, f"the harness's output could not be read before {what}: {failure!r}"
        assert line is not None, f"the harness ended before {what} (see {self._log})"
        return line

    async def _send(self, command: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{command}\n".encode())
        await self._process.stdin.drain()

    async def start(self) -> int:
        """A new nerve process, once its runner looks at the schedules: its pid."""
        known = {line["started"] for line in self.lines if "started" in line}
        await self._send(f"start {BASE!r} {self.clock.real0!r} {SPEED!r} {CADENCE!r}")
        started = await self.wait_for(lambda line: line.get("started", 0) not in {0, *known}, what="a start")
        pid = int(started["started"])
        self.live.add(pid)
        await self.wait_for(lambda line: line.get("ready") == pid, what=f"process {pid} ready")
        return pid

    async def end(self, pid: int, how: signal.Signals) -> int:
        """Send `how` (after SIGKILL no code of nerve's runs) and wait for the process to end."""
        os.kill(pid, how)
        await self._send(f"reap {pid}")
        ended = await self.wait_for(lambda line: line.get("ended") == pid, what=f"process {pid} to end")
        self.live.discard(pid)
        return int(ended["code"])

    async def close(self) -> None:
        """No nerve is left running (after a failure, one still is): the harness reaps them and ends."""
        for pid in self.live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert self._process.stdin is not None
        self._process.stdin.close()
        await asyncio.wait_for(self._process.wait(), LIVENESS)
        await asyncio.wait_for(self._reader, LIVENESS)

    def runs_of(self, pid: int, kind: str) -> list[tuple[str, float]]:
        """The (schedule, slot) runs process `pid` said it started ("start") or answered ("answered")."""
        return [(line[kind], line["slot"]) for line in self.lines if kind in line and line["pid"] == pid]


@contextlib.asynccontextmanager
async def harness(env: dict[str, str], log: Path) -> AsyncIterator[Nerves]:
    """tests/scheduled_turns_proc.py, once it has imported nerve; on the way out no nerve is left."""
    with log.open("ab") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HARNESS),
            env=env,
            cwd=str(ROOT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
        )
    nerves = Nerves(process, log)
    try:
        await nerves.wait_for(lambda line: "imported" in line, what="the harness importing nerve")
        nerves.clock = FastClock()
        yield nerves
    finally:
        await nerves.close()


def model(rng: random.Random) -> Callable[[dict[str, Any]], Reply]:
    """Answers a turn after a while (kills land while the model is asked), naming what it answers."""

    def respond(body: dict[str, Any]) -> Reply:
        asked = own_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        return Reply(content=f"Done: {asked}", delay=rng.uniform(0.05, 0.4))

    return respond


def read_db(db: Path, query: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as connection:
        return connection.execute(query).fetchall()


async def settled(db: Path, runs: Iterable[tuple[str, float]]) -> bool:
    """Whether every one of `runs` (schedule, slot) ended: answered, failed or recorded missed."""
    query = "SELECT schedule_id, slot FROM schedule_runs WHERE status != 'running'"
    ended = set(await asyncio.to_thread(read_db, db, query))
    return all(run in ended for run in runs)


async def until_settled(
    db: Path, runs: Iterable[tuple[str, float]], clock: FastClock, *, after: float = 0.0, what: str
) -> None:
    """Looks at the database until `runs` ended and the fast clock passed `after` (fake)."""
    runs = list(runs)
    deadline = time.monotonic() + LIVENESS + max(0.0, after - clock.now()) / SPEED
    while clock.now() <= after or not await settled(db, runs):
        assert time.monotonic() < deadline, f"{what}: not all ended within {LIVENESS:g} s"
        await asyncio.sleep(0.1)


@dataclass
class Turns:
    """The stored turns: for each delivery id, its user messages and the answers that answered it."""

    asked: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    # Answers with no user message since the answer before (a turn answered twice).
    answers_again: int = 0
    # Answers to more than one user message (a turn a kill cut off, answered with the next).
    answered_together: int = 0


def turns_of(db: Path) -> Turns:
    """The model is sent the user messages since the last answer together, so an answer answers
    each of them, once."""
    rows = read_db(
        db, "SELECT conversation_id, role, tool_calls, event_id FROM messages ORDER BY conversation_id, seq"
    )
    turns = Turns()
    waiting: list[str] = []
    conversation = None
    for at, role, tool_calls, event in rows:
        if at != conversation:
            conversation, waiting = at, []
        if role == "user":
            turns.asked[event or ""] += 1
            waiting.append(event or "")
        elif role == "assistant" and not tool_calls:
            turns.answered.update(waiting)
            turns.answers_again += not waiting
            turns.answered_together += len(waiting) > 1
            waiting = []
    return turns


async def test_sigkill_at_random_moments_runs_every_slot_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    db = tmp_path / "nerve.db"
    schedules = the_schedules()
    recurring = [schedule for schedule in schedules if schedule.rule]
    async with await SQLiteStore.open(db) as store:
        for schedule in schedules:
            await store.add_schedule(schedule)
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    log = tmp_path / "nerve.log"

    async with FakeLLMServer(model(random.Random(SEED))) as llm:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            NERVE_DB=str(db),
            NERVE_MCP_CONFIG=str(servers),
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test-key",
            NERVE_MODEL="test-model",
            NERVE_TURN_LEASE=f"{MIN_TURN_LEASE:g}",
            NERVE_SCHEDULE_GRACE=f"{GRACE:g}",
        )
        began = time.monotonic()
        cut: list[set[tuple[str, float]]] = []  # by kill: the runs under way in the process killed
        async with harness(env, log) as nerves:
            clock = nerves.clock
            for _ in range(KILLS):
                pid = await nerves.start()
                await nerves.wait_for(
                    lambda line, pid=pid: line.get("pid") == pid and "answered" in line,
                    what=f"a run answered by process {pid}",
                )
                if len(cut) >= 2:  # the runs cut two kills ago went on and ended: no pile of them
                    await until_settled(db, cut[-2], clock, what=f"the runs cut before {pid} started")
                now = clock.now()
                if rng.random() < 0.75:  # around the next due slot: as its turn starts
                    due = min(timing.next_slots(s.first_at, s.rule, s.timezone, now, 1)[0] for s in recurring)
                    moment = clock.real_at(due) + rng.uniform(-0.05, 0.3)
                else:
                    moment = time.time() + rng.uniform(0.0, 0.8)
                await asyncio.sleep(max(0.0, moment - time.time()))
                assert await nerves.end(pid, signal.SIGKILL) == -signal.SIGKILL
                cut.append(set(nerves.runs_of(pid, "start")) - set(nerves.runs_of(pid, "answered")))

            last = await nerves.start()
            end = max(clock.now() + 2 * MINUTE, BASE + AT_LEAST)
            expected = slots_up_to(schedules, end)
            await until_settled(db, expected, clock, after=end, what=f"the slots up to the end (see {log})")
            assert await nerves.end(last, signal.SIGTERM) == 0
        wall = time.monotonic() - began

    rows = read_db(db, "SELECT schedule_id, slot, status, note FROM schedule_runs")
    runs = {(schedule_id, slot): (status, note) for schedule_id, slot, status, note in rows}
    outcomes = Counter(runs.get(slot, ("never run", None))[0] for slot in expected)
    turns = turns_of(db)
    doubled = [s for s in expected if turns.asked[event_id(*s)] > 1 or turns.answered[event_id(*s)] > 1]
    unanswered = [s for s in expected if turns.answered[event_id(*s)] == 0]
    figures = {
        "kills": KILLS,
        "slots": len(expected),
        "runs": outcomes["answered"],
        "doubles": len(doubled) + turns.answers_again,
        "missed": outcomes["missed"],
        "failed": outcomes["failed"],
        "never_run": outcomes["never run"],
        "unanswered": len(unanswered),
        "runs_cut_by_a_kill": len(set().union(*cut)),
        "answered_with_the_next": turns.answered_together,
        "wall_seconds": round(wall, 1),
    }
    print(f"\nnerve SIGKILLed around due slots: {figures}")
    not_answered = {s: runs.get(s) for s in expected if runs.get(s, ("",))[0] != "answered"}
    shown = (
        f"{figures}\nnot answered: {not_answered}\ndoubled: {doubled}\nunanswered: {unanswered}\n(see {log})"
    )
    assert figures["slots"] >= 40, shown
    assert outcomes == Counter(answered=len(expected)), shown
    assert figures["doubles"] == 0 and unanswered == [], shown
    # No slot's turn was stored twice, inside the span or after it.
    assert all(count == 1 for count in turns.asked.values()), shown
    assert figures["runs_cut_by_a_kill"] > 0, f"no kill landed while a run was under way: {figures}"
    assert all(runs.get(run, ("",))[0] == "answered" for run in set().union(*cut)), shown

"""Turns of one conversation across processes: one at a time, in arrival order, taken over after a crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from pydantic import ValidationError

from bot.config import Settings
from bot.seams import TurnLock
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage
from tests.fakes.llm_server import FakeLLMServer, Step, own_text, reply
from tests.stores import Backend
from tests.turn_worker import KEY

REPO = Path(__file__).resolve().parent.parent
# Run as a module from the checkout, so that it imports the suite's helpers as the tests do.
WORKER = ("-m", "tests.turn_worker")


async def until(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    """Wait, bounded, for a state another connection or process produces (it cannot notify us)."""
    async with asyncio.timeout(within):
        # No event can cross into this process: the state is in a file another connection writes.
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def tickets_taken(path: Path) -> int:
    """How many turns have queued for a conversation so far (the AUTOINCREMENT counter)."""
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall("SELECT seq FROM sqlite_sequence WHERE name = 'turn_locks'"))
    return int(rows[0][0]) if rows else 0


@contextlib.asynccontextmanager
async def worker(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *WORKER,
        *args,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def read_line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None and process.stderr is not None
    line = await process.stdout.readline()
    if not line:
        stderr = (await process.stderr.read()).decode(errors="replace")
        raise AssertionError(f"the worker ended early: {stderr}")
    return line.decode().strip()


async def test_waiting_turns_of_two_processes_get_the_conversation_in_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "nerve.db"
    async with await SQLiteStore.open(path) as a, await SQLiteStore.open(path) as b:
        order: list[str] = []
        inside = 0

        async def turn(lock: TurnLock, name: str) -> None:
            nonlocal inside
            async with lock.hold(KEY):
                inside += 1
                order.append(name)
                await asyncio.sleep(0)  # let any overlapping turn run here if it could
                assert inside == 1, f"{name} ran while another turn held the conversation"
                inside -= 1

        async with asyncio.timeout(10), asyncio.TaskGroup() as turns, a.turn_lock.hold(KEY):
            for number, (store, name) in enumerate([(b, "b1"), (a, "a2"), (b, "b3"), (a, "a4")], start=2):
                turns.create_task(turn(store.turn_lock, name))
                await queued(path, number)
            # Still held: nobody got in while the first turn ran.
            assert order == []

        assert order == ["b1", "a2", "b3", "a4"]
        assert await tickets_in_queue(path) == 0


async def queued(path: Path, count: int) -> None:
    """Wait until `count` turns have taken a ticket: the arrival order the test then expects."""

    async def enough() -> bool:
        return await tickets_taken(path) >= count

    await until(enough)


async def held_until(path: Path) -> float:
    """When the last lease a holder renewed runs out, on the lock's own clock (`time.time`)."""
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall("SELECT max(expires_at) FROM turn_locks"))
    return float(rows[0][0])


async def tickets_in_queue(path: Path) -> int:
    async with aiosqlite.connect(path) as db:
        rows = list(await db.execute_fetchall("SELECT count(*) FROM turn_locks"))
    return int(rows[0][0])


async def test_a_waiting_turn_holds_no_transaction_and_a_cancelled_one_leaves_the_queue(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nerve.db"
    async with await SQLiteStore.open(path) as a, await SQLiteStore.open(path) as b:
        async with a.turn_lock.hold(KEY):
            waiting = asyncio.create_task(_hold_once(b.turn_lock))
            await queued(path, 2)
            # Another writer gets the write lock at once while a turn waits.
            other = sqlite3.connect(path, isolation_level=None, timeout=0)
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
            finally:
                other.close()
            assert await b.append(KEY, [ChatMessage(role="user", content="written while a turn waits")])
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            assert await tickets_in_queue(path) == 1
        async with asyncio.timeout(5), b.turn_lock.hold(KEY):
            assert await tickets_in_queue(path) == 1


async def _hold_once(lock: TurnLock) -> None:
    async with lock.hold(KEY):
        pass


async def test_a_conversation_held_by_a_killed_process_is_taken_over_after_its_lease(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "nerve.db"
    lease = 0.5
    async with await SQLiteStore.open(path) as store, worker("hold", str(path), str(lease)) as holder:
        async with asyncio.timeout(20):
            assert await read_line(holder) == "holding"
        # Alive, it keeps renewing its lease: three leases pass and the conversation is still its own.
        try:
            async with asyncio.timeout(3 * lease), store.turn_lock.hold(KEY):
                raise AssertionError("the conversation was taken from a live process")
        except TimeoutError:
            pass

        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        expires = await held_until(path)
        async with asyncio.timeout(10), store.turn_lock.hold(KEY):
            taken = time.time()
        assert holder.returncode == -signal.SIGKILL
        # Not before the lease it last renewed ran out, however late that renewal came on a busy machine.
        assert taken >= expires
        assert await tickets_in_queue(path) == 0
    # The line says what was taken over, and that nothing a person asked is dropped with the tickets.
    [line] = [r.getMessage() for r in caplog.records if "took over" in r.getMessage()]
    assert line.startswith("took over conversation ")
    assert "cleared 1 expired lock ticket(s)" in line and "no message is lost" in line
    assert "dropped" not in line


async def test_nerve_turn_lease_sets_how_soon_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "nerve.db"
    lease = 2.0
    # The holder opens its store from the settings, as `nerve slack` does; the default lease is 20 s.
    env = {"NERVE_TURN_LEASE": str(lease)}
    async with await SQLiteStore.open(path) as store, worker("hold-configured", str(path), env=env) as holder:
        async with asyncio.timeout(20):
            assert await read_line(holder) == "holding"
        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        killed = time.time()
        expires = await held_until(path)
        # The configured lease, not the default 20 s: its last renewal runs out within 2 s of the kill...
        assert expires <= killed + lease
        async with asyncio.timeout(3 * lease), store.turn_lock.hold(KEY):
            taken = time.time()
        # ...and the conversation is taken over once it has, not before.
        assert taken >= expires


def test_a_turn_lease_too_short_to_renew_is_refused_with_its_reason() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None, nerve_turn_lease=0.5)  # type: ignore[call-arg]
    assert "NERVE_TURN_LEASE must be at least 2 seconds" in str(refused.value)
    assert Settings(_env_file=None).nerve_turn_lease == 20.0  # type: ignore[call-arg]
    assert Settings(_env_file=None, nerve_turn_lease=2).nerve_turn_lease == 2.0  # type: ignore[call-arg]


@pytest.mark.both_stores
async def test_two_processes_answering_one_thread_take_turns_and_each_sees_its_own_question(
    tmp_path: Path, store_backend: Backend
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    questions = [f"question {i}" for i in range(12)]

    def model(request: dict[str, Any]) -> Step:
        asked = request["messages"][-1]
        # Slow enough that, without a lock across processes, the other process's turn runs meanwhile.
        return reply(f"answer to {own_text(asked['content'])}", delay=0.03)

    async with (
        FakeLLMServer(model) as llm,
        worker("agent", store_backend.location, str(config), llm.base_url) as first,
        worker("agent", store_backend.location, str(config), llm.base_url) as second,
    ):
        async with asyncio.timeout(30):
            assert await read_line(first) == "ready"
            assert await read_line(second) == "ready"
        sent: dict[asyncio.subprocess.Process, list[str]] = {first: [], second: []}
        for i, question in enumerate(questions):
            process = first if i % 2 == 0 else second
            assert process.stdin is not None
            process.stdin.write(json.dumps({"event_id": f"Ev{i}", "text": question}).encode() + b"\n")
            sent[process].append(question)
        answers: dict[str, str] = {}
        async with asyncio.timeout(60):
            for process in (first, second):
                assert process.stdin is not None
                await process.stdin.drain()
                process.stdin.close()
            for process in (first, second):
                for _ in sent[process]:
                    answered = json.loads(await read_line(process))
                    answers[answered["event_id"]] = answered["text"]

    assert answers == {f"Ev{i}": f"answer to {q}" for i, q in enumerate(questions)}
    async with await store_backend.open() as store:
        history = [(m.role, m.content) for m in await store.history(KEY)]
    ran = [content for role, content in history if role == "user"]
    assert sorted(ran) == sorted(questions)
    assert history == [pair for q in ran for pair in (("user", q), ("assistant", f"answer to {q}"))]
    for asked in sent.values():
        assert [q for q in ran if q in asked] == asked, "a process's turns ran out of their arrival order"
    assert len(llm.requests) == len(questions)
    for request in llm.requests:
        # (The turn's own question as its person wrote it: the note of the time now is not history.)
        seen = [(m["role"], own_text(m["content"])) for m in request["messages"] if m["role"] != "system"]
        # Every earlier turn, whole and in the order they ran, then this turn's own question last.
        assert seen == history[: len(seen)], f"a request saw another turn in flight: {seen}"
        assert seen[-1][0] == "user"

"""The turn gate: a bound on turns running at once, a first-come queue behind it, and a hard stop."""

from __future__ import annotations

import asyncio

import pytest

from bot.turn.gate import GateFull, TurnGate


class Turns:
    """Turns that enter the gate, record when they start, and finish only when told to."""

    def __init__(self, gate: TurnGate) -> None:
        self.gate = gate
        self.started: list[str] = []
        self.refused: list[str] = []
        self.queued: list[tuple[str, int]] = []
        self.most_at_once = 0
        self._running = 0
        self._finish: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Condition()
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str) -> asyncio.Task[None]:
        self._finish[name] = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self._turn(name))
        return self.tasks[name]

    async def _turn(self, name: str) -> None:
        async def on_queued(position: int) -> None:
            self.queued.append((name, position))
            await self._note()

        try:
            async with self.gate.admit(on_queued=on_queued):
                self._running += 1
                self.most_at_once = max(self.most_at_once, self._running)
                self.started.append(name)
                await self._note()
                await self._finish[name].wait()
                self._running -= 1
        except GateFull:
            self.refused.append(name)
            await self._note()

    async def _note(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def until(self, check: object, within: float = 5.0) -> None:
        assert callable(check)
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(check)

    async def started_or_waiting(self, name: str) -> None:
        """Wait until `name` has entered or joined the queue (or was refused)."""
        await self.until(
            lambda: name in self.started or name in self.refused or any(n == name for n, _ in self.queued)
        )

    async def started_at_least(self, count: int) -> None:
        await self.until(lambda: len(self.started) >= count)

    def finish(self, name: str) -> None:
        self._finish[name].set()

    async def finish_all(self) -> None:
        for event in self._finish.values():
            event.set()
        async with asyncio.timeout(5):
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)


async def test_turns_within_the_limit_start_at_once_without_queueing() -> None:
    turns = Turns(TurnGate(limit=3, queue=5))
    for name in ("a", "b", "c"):
        turns.start(name)
        await turns.started_or_waiting(name)
    assert turns.started == ["a", "b", "c"] and turns.queued == []
    await turns.finish_all()


async def test_turns_over_the_limit_wait_and_enter_in_arrival_order() -> None:
    gate = TurnGate(limit=2, queue=10)
    turns = Turns(gate)
    for name in ("a", "b", "c", "d", "e"):
        turns.start(name)
        await turns.started_or_waiting(name)
    assert turns.started == ["a", "b"]
    assert turns.queued == [("c", 1), ("d", 2), ("e", 3)]
    assert (gate.running, gate.waiting) == (2, 3)
    # Whichever running turn ends, the longest waiter goes next.
    turns.finish("b")
    await turns.until(lambda: len(turns.started) == 3)
    turns.finish("a")
    await turns.until(lambda: len(turns.started) == 4)
    turns.finish("c")
    await turns.until(lambda: len(turns.started) == 5)
    assert turns.started == ["a", "b", "c", "d", "e"]
    await turns.finish_all()
    assert (gate.running, gate.waiting) == (0, 0)


async def test_no_more_than_the_limit_ever_run_at_once() -> None:
    turns = Turns(TurnGate(limit=3, queue=100))
    names = [f"t{i}" for i in range(20)]
    for name in names:
        turns.start(name)
        await turns.started_or_waiting(name)
    for done, name in enumerate(names, start=1):
        turns.finish(name)
        await turns.started_at_least(min(done + 3, len(names)))
    await turns.finish_all()
    assert turns.started == names
    assert turns.most_at_once == 3


async def test_a_full_queue_refuses_a_new_turn_at_once() -> None:
    gate = TurnGate(limit=1, queue=2)
    turns = Turns(gate)
    for name in ("a", "b", "c", "d", "e"):
        turns.start(name)
        await turns.started_or_waiting(name)
    assert turns.started == ["a"]
    assert [name for name, _ in turns.queued] == ["b", "c"]
    assert turns.refused == ["d", "e"]
    # A place freed in the queue is open again.
    turns.finish("a")
    await turns.until(lambda: turns.started == ["a", "b"])
    turns.start("f")
    await turns.started_or_waiting("f")
    assert turns.refused == ["d", "e"] and turns.queued[-1] == ("f", 2)
    await turns.finish_all()
    assert turns.started == ["a", "b", "c", "f"]


async def test_with_no_queue_a_turn_is_refused_as_soon_as_every_slot_is_taken() -> None:
    turns = Turns(TurnGate(limit=1, queue=0))
    turns.start("a")
    await turns.started_or_waiting("a")
    turns.start("b")
    await turns.started_or_waiting("b")
    assert turns.started == ["a"] and turns.refused == ["b"]
    await turns.finish_all()


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_takes_the_slot() -> None:
    gate = TurnGate(limit=1, queue=5)
    turns = Turns(gate)
    for name in ("a", "b", "c"):
        turns.start(name)
        await turns.started_or_waiting(name)
    turns.tasks["b"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await turns.tasks["b"]
    assert gate.waiting == 1
    turns.finish("a")
    await turns.until(lambda: turns.started == ["a", "c"])
    await turns.finish_all()
    assert (gate.running, gate.waiting) == (0, 0)


async def test_a_waiter_cancelled_just_as_its_slot_arrives_passes_the_slot_on() -> None:
    gate = TurnGate(limit=1, queue=5)
    turns = Turns(gate)
    async with gate.admit():
        for name in ("b", "c"):
            turns.start(name)
            await turns.started_or_waiting(name)
    # Leaving handed the slot to "b"; "b" is cancelled before it could run.
    turns.tasks["b"].cancel()
    await turns.until(lambda: "c" in turns.started)
    assert turns.started == ["c"]
    await turns.finish_all()
    assert (gate.running, gate.waiting) == (0, 0)


async def test_a_failing_turn_frees_its_slot() -> None:
    gate = TurnGate(limit=1, queue=0)
    with pytest.raises(RuntimeError):
        async with gate.admit():
            raise RuntimeError("boom")
    async with gate.admit():
        assert gate.running == 1
    assert gate.running == 0


async def test_a_patient_turn_waits_past_a_full_queue_in_arrival_order() -> None:
    gate = TurnGate(limit=1, queue=1)
    started: list[str] = []
    refused: list[str] = []
    positions: list[tuple[str, int]] = []
    release = asyncio.Event()

    async def turn(name: str, *, patient: bool) -> None:
        async def on_queued(position: int) -> None:
            positions.append((name, position))

        try:
            async with gate.admit(on_queued=on_queued, patient=patient):
                started.append(name)
                await release.wait()
        except GateFull:
            refused.append(name)

    tasks = [asyncio.create_task(turn("first", patient=True))]
    for name in ("r1", "r2", "r3"):
        tasks.append(asyncio.create_task(turn(name, patient=True)))
        await asyncio.sleep(0)
    # A turn that is not patient still finds the queue full: the replays are a real backlog.
    tasks.append(asyncio.create_task(turn("live", patient=False)))
    async with asyncio.timeout(5):
        await tasks[-1]
    assert started == ["first"] and refused == ["live"]
    assert positions == [("r1", 1), ("r2", 2), ("r3", 3)]
    assert (gate.running, gate.waiting) == (1, 3)
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert started == ["first", "r1", "r2", "r3"]
    assert (gate.running, gate.waiting) == (0, 0)

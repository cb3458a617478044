"""A write a cancelled caller started still lands before the caller's cancellation goes on.

anyio cancel scopes (the MCP SDK runs a server's requests in them) cancel the task again on every
await, so a plain `asyncio.shield` lets the caller go after the second cancel while the write is
still under way; whoever awaited the caller (a shutdown) then closes what the write needs."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from bot.turn import deadline
from bot.turn.deadline import finish_anyway


async def settle_soon(gate: asyncio.Event, landed: list[str]) -> str:
    await gate.wait()
    landed.append("cancelled")
    return "written"


async def test_the_write_lands_before_a_caller_cancelled_by_an_anyio_scope_ends() -> None:
    gate, landed = asyncio.Event(), []
    scope_ready = asyncio.Event()
    caller_scope: list[anyio.CancelScope] = []

    async def caller() -> None:
        with anyio.CancelScope() as scope:
            caller_scope.append(scope)
            try:
                scope_ready.set()
                await asyncio.sleep(3600)
            finally:
                await finish_anyway(settle_soon(gate, landed))

    task = asyncio.create_task(caller())
    await scope_ready.wait()
    caller_scope[0].cancel()  # re-delivered on every await until the scope is left
    for _ in range(50):
        await asyncio.sleep(0)
    assert not task.done(), "the caller waits for its write"
    gate.set()
    await task  # the scope caught its own cancellation
    assert landed == ["cancelled"]


async def test_a_caller_cancelled_twice_waits_for_the_write_then_is_still_cancelled() -> None:
    gate, landed = asyncio.Event(), []
    started = asyncio.Event()

    async def caller() -> str:
        started.set()
        return await finish_anyway(settle_soon(gate, landed))

    task = asyncio.create_task(caller())
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert landed == ["cancelled"]


async def test_without_cancellation_the_result_and_errors_come_back() -> None:
    gate, landed = asyncio.Event(), []
    gate.set()
    assert await finish_anyway(settle_soon(gate, landed)) == "written"

    async def broken() -> None:
        raise ValueError("the store is closed")

    with pytest.raises(ValueError, match="closed"):
        await finish_anyway(broken())


async def test_a_write_that_hangs_holds_a_cancelled_caller_only_for_the_patience(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deadline, "PATIENCE", 0.2)
    hang = asyncio.Event()

    async def stuck_write() -> None:
        await hang.wait()

    caller = asyncio.create_task(deadline.finish_anyway(stuck_write()))
    await asyncio.sleep(0.01)
    caller.cancel()
    started = asyncio.get_running_loop().time()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await caller
    assert asyncio.get_running_loop().time() - started < 2.0
    hang.set()

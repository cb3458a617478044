"""Ctrl-C in the terminal: it stops the work it was pressed during, also when a cancel is lost on the
way, and blocks that close in any order leave SIGINT as it was before them."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from adapters.terminal import keyboard
from adapters.terminal.keyboard import Interrupted, interruptible, on_ctrl_c


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


async def test_ctrl_c_stops_work_that_swallows_the_first_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyboard, "CANCEL_AGAIN_SECONDS", 0.01)
    started = asyncio.Event()
    swallowed = asyncio.Event()

    async def stubborn() -> str:
        # What a library that catches the cancel to clean up, and then goes on, does to it.
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()
        await asyncio.sleep(3600)
        return "never"

    async def press_when_started() -> None:
        await started.wait()
        ctrl_c()

    presser = asyncio.create_task(press_when_started())
    with pytest.raises(Interrupted):
        await asyncio.wait_for(interruptible(stubborn()), 60)
    await presser
    assert swallowed.is_set(), "the first cancel was swallowed, and the work still stopped"


async def test_work_that_ends_is_its_result_and_ctrl_c_afterwards_is_the_callers_again() -> None:
    before = signal.getsignal(signal.SIGINT)

    async def quick() -> int:
        return 7

    assert await interruptible(quick()) == 7
    assert signal.getsignal(signal.SIGINT) is before


async def test_blocks_closed_out_of_order_put_back_what_sigint_did_before_them() -> None:
    before = signal.getsignal(signal.SIGINT)
    pressed: list[str] = []
    heard = asyncio.Event()

    def press(name: str) -> None:
        pressed.append(name)
        heard.set()

    first = on_ctrl_c(lambda: press("first"))
    second = on_ctrl_c(lambda: press("second"))
    first.__enter__()
    second.__enter__()
    # A question asked in a task of its own opened `second`; the turn around it ends first.
    first.__exit__(None, None, None)
    ctrl_c()
    await asyncio.wait_for(heard.wait(), 60)
    assert pressed == ["second"]
    second.__exit__(None, None, None)
    assert signal.getsignal(signal.SIGINT) is before, "SIGINT does what it did before the blocks"


async def test_a_caller_cancelled_meanwhile_is_cancelled_not_interrupted() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.sleep(3600)

    caller = asyncio.create_task(interruptible(waits()))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller

"""The watcher that takes stops pressed in other processes ends with its turn's work, even when the
cancellation meant to end it is dropped on the way (Python 3.11's `asyncio.wait_for`, inside the
database pool, drops one that arrives together with a connection): the turn's thread is answered
on, never held by a watcher polling forever."""

from __future__ import annotations

import asyncio
import contextlib

from adapters.slack.stops import Stops
from bot.types import HELD_TURN, ConversationKey

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1.0")


class DroppingBoard:
    """A stop board whose read swallows the cancellation that reaches it, as such a library does."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()
        self.reads = 0

    async def stops_asked(self, turn: str) -> list[str]:
        self.reads += 1
        self.reading.set()
        with contextlib.suppress(asyncio.CancelledError):  # dropped: the read returns as if nothing happened
            await asyncio.Event().wait()  # until cancelled
        return []

    async def request_stop(self, key: ConversationKey, by: str) -> str | None:
        return None

    async def stop_pending(self, turn: str) -> bool:
        return False

    async def drop_stops(self, turn: str) -> None:
        return None


async def test_a_turn_ends_when_its_stop_watcher_drops_the_cancellation_meant_to_end_it() -> None:
    board = DroppingBoard()
    stops = Stops(board=board, poll=0.001)

    async def work() -> str:
        held = HELD_TURN.get()
        assert held is not None
        held.turn = "turn-1"  # the work holds its thread, as the turn lock would mark it
        await board.reading.wait()  # the watcher is in the middle of a read when the work ends
        held.turn = None
        return "answer"

    async with asyncio.timeout(30):  # a hang fails here instead of stalling the suite
        assert await stops.run(KEY, work(), "U1") == "answer"
    assert board.reads == 1
    assert stops.working(KEY) == 0

"""A turn cancelled (stopped, timed out, shut down) while it waits for a database connection stays
cancelled, even when the connection reaches it at the same moment.

On Python 3.11 psycopg_pool waits for a connection through `asyncio.wait_for`, which returns the
connection and drops the cancellation when both arrive together; the cancelled task then carried on
as if nothing happened (a turn's stop watcher polled forever and its thread never answered again).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.store.postgres_connection import SteadyPool
from tests.stores import server_url


async def test_a_cancel_that_arrives_with_the_connection_is_kept_and_the_connection_goes_back() -> None:
    pool: SteadyPool = SteadyPool(server_url(), min_size=1, max_size=1, kwargs={"autocommit": True})
    await pool.open(wait=True, timeout=10)
    try:
        held = await pool.getconn()
        got: list[Any] = []

        async def wait_for_one() -> None:
            got.append(await pool.getconn())

        waiter = asyncio.create_task(wait_for_one())
        async with asyncio.timeout(30):
            while pool.get_stats().get("requests_waiting", 0) < 1:  # noqa: ASYNC110 (the queue has no event)
                await asyncio.sleep(0.01)
        # Handed over and cancelled before the waiter runs again: both arrive together.
        await pool.putconn(held)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert got == [], "the cancelled task went on with a connection"
        # The connection went back: the pool's only one can be taken again at once.
        again = await pool.getconn(timeout=5)
        await pool.putconn(again)
    finally:
        await pool.close()

"""A psycopg pool that finds a returning database within seconds, however long it was away.

psycopg_pool replaces a lost connection in the background, waiting twice as long after each failed
attempt (1, 2, 4, 8, 16, 32 s …). After a 45 s outage its next attempt may come 18 s after the
database is back, and until then every statement waits and `/readyz` says "database unreachable".
`SteadyPool` caps that wait at `RECONNECT_PAUSE_LONGEST`: one cheap connection attempt every few
seconds while the database is away, and ready again within that many seconds of its return.

It also tells `bot.store.postgres_outage` when a connection succeeds: the end of an outage's log lines.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from bot.store.postgres_outage import OUTAGE, install

# The longest pause between two attempts to reconnect a pool.
RECONNECT_PAUSE_LONGEST = 2.0


class SteadyPool(AsyncConnectionPool[Any]):
    """`AsyncConnectionPool` whose reconnection attempts are at most `RECONNECT_PAUSE_LONGEST` apart.

    Opened by its owner (`open=False`); a connection the server dropped (a restart) is noticed before
    use, not by a statement (`check`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        install()
        defaults: dict[str, Any] = {"open": False, "check": AsyncConnectionPool.check_connection}
        super().__init__(*args, **defaults | kwargs)

    async def _connect(self, timeout: float | None = None) -> psycopg.AsyncConnection[Any]:  # noqa: ASYNC109 (psycopg_pool's signature)
        conn: psycopg.AsyncConnection[Any] = await super()._connect(timeout)
        OUTAGE.reachable()
        return conn

    async def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is not None:
            # The pool doubles the pause after this attempt fails: keep the doubled one within bounds.
            attempt.delay = min(attempt.delay, RECONNECT_PAUSE_LONGEST / AttemptWithBackoff.DELAY_BACKOFF)
        await super()._add_connection(attempt, growing)

"""Received messages as jobs that every nerve process on one PostgreSQL database shares.

With NERVE_DATABASE_URL set, the process that receives a message enqueues a job, and the worker of
whichever replica is free runs it (procrastinate's jobs, in nerve's schema: `bot.jobs.turns`).
procrastinate is imported only when jobs are opened: SQLite, which has no jobs, never needs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.store.choose import check_postgres_url, postgres_support

if TYPE_CHECKING:
    from bot.jobs.turns import TurnJobs

__all__ = ["JobHandler", "TurnJobs", "open_configured_jobs", "open_turn_jobs"]

# `async def handler(**payload: str) -> None`, called with the payload given to `enqueue` as keyword
# arguments (e.g. `async def answer(*, event_id: str) -> None`). It runs in whichever process's
# worker takes the job. An exception it raises marks the job failed, and the job is not run again:
# the handler owns telling the person. A job cut off by a drain, or whose process died, is run again
# from the start by another process, so a handler must be safe to run again after a partial run.
JobHandler = Callable[..., Awaitable[None]]


async def open_turn_jobs(
    database_url: str, *, stall_timeout: float = 30.0, poll_interval: float = 5.0
) -> TurnJobs:
    check_postgres_url(database_url, ": jobs shared by several nerve processes live on PostgreSQL only")
    with postgres_support():
        from bot.jobs.turns import TurnJobs
    return await TurnJobs.open(database_url, stall_timeout=stall_timeout, poll_interval=poll_interval)


async def open_configured_jobs(settings: Settings) -> TurnJobs | None:
    """None on SQLite (one process: the front end answers in process)."""
    if settings.nerve_database_url is None:
        return None
    return await open_turn_jobs(
        settings.nerve_database_url.get_secret_value(), stall_timeout=settings.nerve_worker_stall_timeout
    )


def __getattr__(name: str) -> Any:
    """`from bot.jobs import TurnJobs` imports procrastinate only when asked for."""
    if name == "TurnJobs":
        from bot.jobs.turns import TurnJobs

        return TurnJobs
    raise AttributeError(f"module 'bot.jobs' has no attribute {name!r}")

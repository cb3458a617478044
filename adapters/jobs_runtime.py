"""A front end's share of the jobs on PostgreSQL (`bot.jobs`): open them, run them, drain them.

`nerve slack`, `nerve worker` and `nerve discord` each open the jobs of NERVE_DATABASE_URL for the
life of the process (`shared_jobs`; none on SQLite), register their platform's handlers and run a
worker (`work`), and on SIGTERM drain the front end's own turns and the worker together (`drained`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

from bot.config import Settings
from bot.jobs import JobHandler, open_configured_jobs

if TYPE_CHECKING:
    from bot.jobs import TurnJobs


class RunsJobs(Protocol):
    """A front end whose platform's jobs this process's worker runs."""

    def job_handlers(self) -> dict[str, JobHandler]:
        """Its jobs' handlers, by job name (`<platform>.<what>`)."""
        ...


class Drains(Protocol):
    """A front end that winds its own running turns down on SIGTERM."""

    async def drain(self, grace: float) -> None: ...


@asynccontextmanager
async def shared_jobs(settings: Settings) -> AsyncIterator[TurnJobs | None]:
    """The jobs every process on NERVE_DATABASE_URL shares, for the block; None on SQLite."""
    jobs = await open_configured_jobs(settings)
    try:
        yield jobs
    finally:
        if jobs is not None:
            await jobs.aclose()


def work(jobs: TurnJobs, front: RunsJobs, settings: Settings) -> None:
    """Run `front`'s jobs in this process too, NERVE_WORKER_CONCURRENCY at a time."""
    for name, handler in front.job_handlers().items():
        jobs.register(name, handler)
    jobs.run_worker(settings.nerve_worker_concurrency)


async def drained(front: Drains, jobs: TurnJobs | None, grace: float) -> None:
    """SIGTERM: no new work here; what runs gets `grace` seconds, then the worker's cut-off jobs go
    back to the queue for another process (`TurnJobs.drain`)."""
    if jobs is None:
        await front.drain(grace)
        return
    await asyncio.gather(front.drain(grace), jobs.drain(grace))

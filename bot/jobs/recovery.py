"""Jobs get going again: those whose worker died are run again by another, and the workers are
told at once when a conversation's next job may start.

A killed process's jobs would stay `doing` for ever, holding their conversations' locks. So every
worker deletes the workers whose heartbeat is older than the stall timeout (never its own: after an
outage its beat is old, but it is right here) and puts their jobs back, rows locked so two workers
never put back one job twice. A job keeps its id, so it stays first of its conversation; one whose
worker died `MAX_RUNS` times fails instead: a message that kills its process cannot take down every
replica in turn; one whose work was queued again meanwhile (only one job of a queueing lock may
wait) is ended ("aborted"), and the waiting one does that work. A job waiting behind another was
inserted long ago, so nothing would tell the workers when the job before it ends:
`WakingJobManager` does."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, LiteralString

import psycopg
from procrastinate import App, exceptions, manager, sql, utils
from procrastinate import jobs as jobs_module

from bot.store.postgres_outage import OUTAGE, unreachable_reason

logger = logging.getLogger(__name__)

# A job is started at most this many times in all before it is given up on.
MAX_RUNS = 5

_PRUNE: LiteralString = """
DELETE FROM procrastinate_workers
 WHERE last_heartbeat < NOW() - make_interval(secs => %(seconds)s) AND NOT (id = ANY(%(own)s))
RETURNING id
"""

_ORPHANS: LiteralString = """
SELECT id, queue_name, lock, attempts FROM procrastinate_jobs
 WHERE status = 'doing' AND worker_id IS NULL AND queue_name = ANY(%(queues)s)
 ORDER BY id
 FOR UPDATE SKIP LOCKED
"""


class WakingJobManager(manager.JobManager):
    """procrastinate's job manager, plus a wake-up of the queue's workers when a lock is let go."""

    async def finish_job(self, job: jobs_module.Job, status: jobs_module.Status, delete_job: bool) -> None:
        await super().finish_job(job, status, delete_job)
        if job.lock is not None:
            await self.wake(job.id, job.queue)

    async def retry_job(
        self,
        job: jobs_module.Job,
        retry_at: datetime.datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        await super().retry_job(job, retry_at=retry_at, priority=priority, queue=queue, lock=lock)
        await self.wake(job.id, queue or job.queue)

    async def wake(self, job_id: int | None, queue: str) -> None:
        """Best effort, since workers poll anyway."""
        (channel,) = manager.get_channel_for_queues([queue])  # the one the queue's workers listen on
        try:
            await self.connector.execute_query_async(
                "SELECT pg_notify(%(channel)s, %(payload)s)",
                channel=channel,
                payload=json.dumps({"type": "job_inserted", "job_id": job_id}),
            )
        except exceptions.ConnectorException as exc:
            reason = unreachable_reason(exc)
            if reason is not None:
                OUTAGE.unreachable_now(reason)  # one line for the outage; the workers poll anyway
                return
            logger.warning(
                "could not wake the workers for job %s (they will find it by polling): %s",
                job_id,
                exc.__cause__ or repr(exc),
            )


async def recover_stalled_jobs(
    app: App, *, queues: Sequence[str], stall_timeout: float, own: Collection[int] = ()
) -> list[int]:
    """Put the jobs of dead workers (never of `own`) back in `queues`; return their ids."""
    retried: list[int] = []
    first_in: dict[str, int] = {}  # queue → its first job put back
    pool = app.connector.pool  # type: ignore[attr-defined]
    async with pool.connection() as conn:
        rows = await conn.execute(_PRUNE, {"seconds": float(stall_timeout), "own": list(own)})
        pruned = [worker_id for (worker_id,) in await rows.fetchall()]
    if pruned:
        logger.warning(
            "workers %s of another process sent no heartbeat for %.0f s: taken for dead, their jobs"
            " run again",
            pruned,
            stall_timeout,
        )
    async with pool.connection() as conn, conn.transaction():
        orphans = await (await conn.execute(_ORPHANS, {"queues": list(queues)})).fetchall()
        for job_id, queue, lock, attempts in orphans:
            if attempts + 1 >= MAX_RUNS:
                logger.error(
                    "job %s (conversation %s) was started %d times and its worker died each time:"
                    " giving up on it",
                    job_id,
                    lock,
                    attempts + 1,
                )
                finish = {"job_id": job_id, "status": "failed", "delete_job": False}
                await conn.execute(sql.queries["finish_job"], finish)
            elif await _put_back(conn, job_id):
                logger.warning("job %s (conversation %s) lost its worker: running it again", job_id, lock)
                retried.append(job_id)
            else:
                # The same work was queued again while this job ran (a schedule's next look, a
                # decision clicked twice): only one job of a queueing lock may wait, and that one does
                # it, once this one no longer holds their lock.
                logger.warning(
                    "job %s (conversation %s) lost its worker, and a job queued since does its work",
                    job_id,
                    lock,
                )
                finish = {"job_id": job_id, "status": "aborted", "delete_job": False}
                await conn.execute(sql.queries["finish_job"], finish)
            first_in.setdefault(queue, job_id)
    if isinstance(app.job_manager, WakingJobManager):
        for queue, job_id in first_in.items():
            await app.job_manager.wake(job_id, queue)
    return retried


async def _put_back(conn: psycopg.AsyncConnection[Any], job_id: int) -> bool:
    """Back in the queue, run again at once; False when a job of its queueing lock waits already."""
    retry = {"job_id": job_id, "retry_at": utils.utcnow()}
    retry |= dict.fromkeys(("new_priority", "new_queue_name", "new_lock"))
    try:
        async with conn.transaction():  # a savepoint: the other orphans are put back all the same
            await conn.execute(sql.queries["retry_job"], retry)
    except psycopg.errors.UniqueViolation:
        return False
    return True


async def keep_recovering(
    app: App, *, queues: Sequence[str], stall_timeout: float, own: Callable[[], Collection[int]]
) -> None:
    while True:
        await asyncio.sleep(stall_timeout / 3)
        try:
            await recover_stalled_jobs(app, queues=queues, stall_timeout=stall_timeout, own=own())
        except Exception as exc:
            raise_if_cancelled(exc)
            reason = unreachable_reason(exc)
            if reason is not None:
                OUTAGE.unreachable_now(reason)  # one line for the whole outage, not one per round
                continue
            # Some errors (a timeout, a closed pool) carry no message: then their type says what.
            logger.warning(
                "could not look for jobs of dead workers (trying again): %s", str(exc) or repr(exc)
            )


def raise_if_cancelled(exc: Exception) -> None:
    """A cancel landing in a database call can come out as the driver's error (psycopg closes a
    connection whose query outlives its cancel by 5 s, then the rollback fails): a loop that goes on
    after errors must still stop when its task was cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc

"""Jobs whose worker died are run again by another.

Every worker beats (procrastinate's `procrastinate_workers.last_heartbeat`). A process that is
SIGKILLed, or loses its machine, stops beating, and the jobs it had taken stay `doing` for ever: the
job is never finished and, since a running job holds its conversation's lock, nothing else of that
conversation would run either. So every worker, every third of the stall timeout:

1. deletes the workers whose heartbeat is older than the stall timeout, its own excepted (their
   jobs' `worker_id` becomes NULL), then
2. puts each `doing` job of the worker's queues that has no worker back in its queue, in one
   transaction with the jobs' rows locked (`FOR UPDATE SKIP LOCKED`): two workers recovering at
   once never put back the same job twice, and a job another worker has just taken is not touched.

A job put back keeps its id, so it is again the first of its conversation and runs before the
conversation's later jobs. A job whose worker died `MAX_RUNS` times is marked failed instead: a
message that kills the process answering it must not take down every replica in turn.

The stall timeout must be well above any pause of a live process (its event loop blocked, the
database unreachable): a worker taken for dead while it still runs its job would see that job run a
second time elsewhere. A process never takes its own worker for dead: after the database was away
longer than the stall timeout, its worker's last heartbeat is old, but the worker is right here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, LiteralString

from procrastinate import App, sql, utils

from bot.jobs.wake import WakingJobManager
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


async def recover_stalled_jobs(
    app: App, *, queues: Sequence[str], stall_timeout: float, own: Collection[int] = ()
) -> list[int]:
    """Put the jobs of dead workers back in `queues`; return their ids (those given up on excluded).
    `own`: this process's workers, never taken for dead by it."""
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
                await conn.execute(sql.queries["finish_job"], _finish(job_id))
            else:
                logger.warning("job %s (conversation %s) lost its worker: running it again", job_id, lock)
                await conn.execute(sql.queries["retry_job"], _retry(job_id))
                retried.append(job_id)
                first_in.setdefault(queue, job_id)
    if isinstance(app.job_manager, WakingJobManager):
        for queue, job_id in first_in.items():
            await app.job_manager.wake(job_id, queue)
    return retried


async def keep_recovering(
    app: App, *, queues: Sequence[str], stall_timeout: float, own: Callable[[], Collection[int]]
) -> None:
    """Recover stalled jobs every third of the stall timeout, until cancelled, never taking the
    workers `own()` names (this process's) for dead. A failed round (the database away) is logged
    and the next one tried."""
    while True:
        await asyncio.sleep(stall_timeout / 3)
        try:
            await recover_stalled_jobs(app, queues=queues, stall_timeout=stall_timeout, own=own())
        except Exception as exc:
            reason = unreachable_reason(exc)
            if reason is not None:
                OUTAGE.unreachable_now(reason)  # one line for the whole outage, not one per round
                continue
            # Some errors (a timeout, a closed pool) carry no message: then their type says what.
            logger.warning(
                "could not look for jobs of dead workers (trying again): %s", str(exc) or repr(exc)
            )


def _retry(job_id: int) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "retry_at": utils.utcnow(),
        "new_priority": None,
        "new_queue_name": None,
        "new_lock": None,
    }


def _finish(job_id: int) -> dict[str, Any]:
    return {"job_id": job_id, "status": "failed", "delete_job": False}

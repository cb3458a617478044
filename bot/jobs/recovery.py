"""Jobs whose worker died are run again by another.

Every worker beats (procrastinate's `procrastinate_workers.last_heartbeat`). A process that is
SIGKILLed, or loses its machine, stops beating, and the jobs it had taken stay `doing` for ever: the
job is never finished and, since a running job holds its conversation's lock, nothing else of that
conversation would run either. So every worker, every third of the stall timeout:

1. deletes the workers whose heartbeat is older than the stall timeout (procrastinate's own
   `prune_stalled_workers`; their jobs' `worker_id` becomes NULL), then
2. puts each `doing` job of the worker's queues that has no worker back in its queue, in one
   transaction with the jobs' rows locked (`FOR UPDATE SKIP LOCKED`): two workers recovering at
   once never put back the same job twice, and a job another worker has just taken is not touched.

A job put back keeps its id, so it is again the first of its conversation and runs before the
conversation's later jobs. A job whose worker died `MAX_RUNS` times is marked failed instead: a
message that kills the process answering it must not take down every replica in turn.

The stall timeout must be well above any pause of a live process (its event loop blocked, the
database unreachable): a worker taken for dead while it still runs its job would see that job run a
second time elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, LiteralString

from procrastinate import App, sql, utils

from bot.jobs.wake import WakingJobManager

logger = logging.getLogger(__name__)

# A job is started at most this many times in all before it is given up on.
MAX_RUNS = 5

_ORPHANS: LiteralString = """
SELECT id, queue_name, lock, attempts FROM procrastinate_jobs
 WHERE status = 'doing' AND worker_id IS NULL AND queue_name = ANY(%(queues)s)
 ORDER BY id
 FOR UPDATE SKIP LOCKED
"""


async def recover_stalled_jobs(app: App, *, queues: Sequence[str], stall_timeout: float) -> list[int]:
    """Put the jobs of dead workers back in `queues`; return their ids (those given up on excluded)."""
    pruned = await app.job_manager.prune_stalled_workers(stall_timeout)
    if pruned:
        logger.warning("workers %s sent no heartbeat for %.0f s: taken for dead", pruned, stall_timeout)
    retried: list[int] = []
    first_in: dict[str, int] = {}  # queue → its first job put back
    pool = app.connector.pool  # type: ignore[attr-defined]
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


async def keep_recovering(app: App, *, queues: Sequence[str], stall_timeout: float) -> None:
    """Recover stalled jobs every third of the stall timeout, until cancelled. A failed round (the
    database away) is logged and the next one tried."""
    while True:
        await asyncio.sleep(stall_timeout / 3)
        try:
            await recover_stalled_jobs(app, queues=queues, stall_timeout=stall_timeout)
        except Exception as exc:
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

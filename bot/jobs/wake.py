"""Workers are told at once when a conversation's next job may start.

procrastinate notifies workers (LISTEN/NOTIFY) when a job is inserted, and otherwise polls every few
seconds. A job that waits behind another of its conversation (the same `lock`) was inserted long
ago: when the job before it ends, nothing tells anyone, and the next message of a thread would wait
for the next poll. So the job manager here sends the same notification procrastinate sends for an
insert whenever a job with a lock ends or goes back to the queue, on the channel of the job's queue;
every worker of that queue wakes and one of them takes the job.
"""

from __future__ import annotations

import datetime
import json
import logging

from procrastinate import exceptions, manager
from procrastinate import jobs as jobs_module

from bot.store.postgres_outage import OUTAGE, unreachable_reason

logger = logging.getLogger(__name__)


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
        """Tell every worker of `queue` that a job may be ready (they each try to fetch one).

        Best effort: the job itself is already finished or queued, and workers poll anyway."""
        try:
            await self.connector.execute_query_async(
                "SELECT pg_notify(%(channel)s, %(payload)s)",
                channel=wake_channel(queue),
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


def wake_channel(queue: str) -> str:
    """The channel procrastinate's workers of `queue` listen on."""
    (channel,) = manager.get_channel_for_queues([queue])
    return channel

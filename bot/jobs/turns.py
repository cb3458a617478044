"""`TurnJobs`: received messages as procrastinate jobs, shared by every nerve process on a database.

One `TurnJobs` per process. The front end that receives a message enqueues a job naming it; the
worker of any process on the database runs it, with the handler that process registered under the
job's name. What procrastinate guarantees and nerve relies on:

- a job's `queueing_lock` (the platform's event id) is unique among jobs still waiting, so a
  re-delivery that arrives before the job started adds nothing;
- a job's `lock` (the conversation) lets one job of it run at a time in the whole database, in
  the order they were enqueued;
- the rest (waking workers when a lock is let go, recovering dead workers' jobs, draining) is in
  `bot.jobs.wake`, `bot.jobs.recovery` and `bot.jobs.worker`.

The jobs live in nerve's schema (the first of the connection's search_path), one queue per platform
named after that schema and the platform (`queue_of`): a worker takes only the jobs of the names its
process registered, so one platform's process never takes another's job it has no handler for, and
two deployments sharing one database in two schemas never wake, abort or run each other's jobs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import psycopg
from procrastinate import App, BaseRetryStrategy, PsycopgConnector, RetryDecision
from procrastinate import exceptions as procrastinate_errors
from procrastinate.jobs import Job
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bot.errors import ConfigError, StoreError
from bot.jobs.handlers import JobHandler
from bot.jobs.schema import install_schema
from bot.jobs.wake import WakingJobManager
from bot.jobs.worker import WorkerOptions, WorkerRunner
from bot.store.postgres import CONNECT_TIMEOUT_SECONDS, describe, postgres_error
from bot.store.postgres_migrate import current_schema
from bot.store.postgres_pool import SteadyPool

logger = logging.getLogger(__name__)

# Connections procrastinate uses: short statements (fetch, finish, heartbeat), plus one LISTEN
# session of its own outside the pool. The handlers' own database work goes through the store.
POOL_SIZE = 5
POOL_WAIT_SECONDS = 30.0
DEFAULT_STALL_TIMEOUT = 30.0
DEFAULT_POLL_INTERVAL = 5.0

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class RunAgainIfCutOff(BaseRetryStrategy):
    """A job cancelled by a drain goes back to the queue at once, for another process; a job whose
    handler raised is not run again (its handler has told the person already)."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        return RetryDecision() if isinstance(exception, asyncio.CancelledError) else None


@dataclass(eq=False)
class TurnJobs:
    """The jobs of one nerve deployment on PostgreSQL: enqueue them, and run a worker for them.

    `schema` is where procrastinate's tables are; `queue` the prefix of this deployment's
    procrastinate queues, one per platform (`queue_of`, for operators' `procrastinate` commands).
    Made by `TurnJobs.open`, around an app whose pool is open.
    """

    app: App
    pool: AsyncConnectionPool[Any]
    _: KW_ONLY
    schema: str
    where: str
    stall_timeout: float
    poll_interval: float

    def __post_init__(self) -> None:
        self.queue = queue_for(self.schema)
        self._runner: WorkerRunner | None = None
        self._queues: set[str] = set()  # those of the names registered here
        self._closed = False

    @classmethod
    async def open(
        cls,
        database_url: str,
        *,
        schema: str | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> TurnJobs:
        """Connect to `database_url`, install procrastinate's tables if they are not there, open a pool.

        `schema` overrides the URL's search_path (a plain lower-case name). `stall_timeout`: seconds
        without a heartbeat after which a worker counts as dead (`NERVE_WORKER_STALL_TIMEOUT`).
        `poll_interval`: seconds between two looks for jobs when no notification came.
        """
        if stall_timeout <= 0 or poll_interval <= 0:
            raise ConfigError("the stall timeout and the poll interval of the job worker must be positive")
        where = describe(database_url)
        kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
        if schema is not None:
            if not _SCHEMA_NAME.match(schema):
                raise ConfigError(
                    f"{schema!r} is not a schema name nerve can use: lower-case letters, digits, _"
                )
            kwargs["options"] = f"-csearch_path={schema}"
        try:
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True, **kwargs) as conn:
                if await install_schema(conn):
                    logger.info("installed procrastinate's tables on %s", where)
                found_schema = await current_schema(conn)
        except psycopg.Error as exc:
            raise postgres_error(exc, where) from exc
        # procrastinate's LISTEN session is opened with the pool's conninfo and kwargs.
        pool: AsyncConnectionPool[Any] = SteadyPool(
            database_url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs=kwargs,
            timeout=POOL_WAIT_SECONDS,
            name="nerve-jobs",
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
        except (psycopg.Error, PoolTimeout) as exc:
            await pool.close()
            raise postgres_error(exc, where) from exc
        connector = PsycopgConnector()
        app = App(connector=connector)
        app.job_manager = WakingJobManager(connector)
        await app.open_async(pool)
        return cls(
            app,
            pool,
            schema=found_schema,
            where=where,
            stall_timeout=stall_timeout,
            poll_interval=poll_interval,
        )

    def register(self, name: str, handler: JobHandler) -> None:
        """Run `handler(**payload)` for the jobs named `name` that this process's worker takes.

        A name is `<platform>.<what>` (`chat.event`); the jobs of one platform share a queue
        (`queue_of`), and `run_worker` takes the queues of the names registered here, so every
        process that runs a platform's jobs registers all of that platform's names.
        """
        if name in self.app.tasks:
            raise ValueError(f"a handler for jobs named {name!r} is registered already")
        self._queues.add(self.queue_of(name))

        async def run(**payload: Any) -> None:
            # Always a coroutine function, so procrastinate cancels it (not a thread) on a drain.
            await handler(**payload)

        self.app.task(name=name, queue=self.queue_of(name), retry=RunAgainIfCutOff(), pass_context=False)(run)

    def queue_of(self, name: str) -> str:
        """The queue of the jobs named `name`: this deployment's, for the platform before the dot."""
        return f"{self.queue}-{name.partition('.')[0]}"

    async def enqueue(self, name: str, payload: Mapping[str, str], *, event: str, conversation: str) -> bool:
        """Queue a job `name` with `payload`; False if a job for `event` is still waiting to start.

        `event` is the platform's id of the delivery, unique across platforms (prefix it, e.g.
        `chat:Ev123`). procrastinate refuses a second job with the same `event` only while the
        first is waiting ("todo"): once it has started or ended, the same id would queue again.
        So the first guard against re-deliveries is nerve's inbox (the event id is unique there);
        this one covers a re-delivery racing the first in another process.

        `conversation` names the thread (`str(incoming.key)`): the jobs of one conversation run one
        at a time, in the order they were enqueued, across every process on the database, while
        other conversations' jobs run alongside.
        """
        self._check_open()
        deferrer = self.app.configure_task(
            name, queue=self.queue_of(name), lock=conversation, queueing_lock=event
        )
        try:
            await deferrer.defer_async(**payload)
        except procrastinate_errors.AlreadyEnqueued:
            return False
        except procrastinate_errors.ConnectorException as exc:
            raise StoreError(f"could not queue a job on {self.where}: {exc}") from exc
        return True

    async def pending(self, event: str) -> bool:
        """A job for `event` is waiting or running (in any process, in any of this deployment's
        queues): start-up recovery and the sweep for deliveries recorded but never queued (the
        process died in between) queue only events without one."""
        self._check_open()
        try:
            async with self.pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT 1 FROM procrastinate_jobs WHERE queueing_lock = %s AND queue_name LIKE %s"
                    " AND status IN ('todo', 'doing') LIMIT 1",
                    (event, f"{self.queue}-%"),
                )
                return await cursor.fetchone() is not None
        except psycopg.Error as exc:
            raise StoreError(f"could not look for the job of {event} on {self.where}: {exc}") from exc

    def run_worker(self, concurrency: int) -> None:
        """Start this process's worker as a task of the running loop: it runs up to `concurrency` jobs
        at once (`NERVE_WORKER_CONCURRENCY`) of the queues of the names registered so far, until
        `drain`, starts itself again after a failure, and puts the jobs of dead workers of those
        queues back in them."""
        self._check_open()
        if concurrency < 1:
            raise ValueError("a worker runs at least one job at a time")
        if self._runner is not None:
            raise RuntimeError("this process's worker was started already")
        queues = tuple(sorted(self._queues))
        if not queues:
            raise RuntimeError("register the handlers of this process's jobs before running its worker")
        options = WorkerOptions(
            queues=queues,
            concurrency=concurrency,
            stall_timeout=self.stall_timeout,
            poll_interval=self.poll_interval,
        )
        self._runner = WorkerRunner(self.app, options)
        self._runner.start()

    def worker_alive(self) -> bool:
        """This process's worker is registered and taking jobs (for /readyz); False before
        `run_worker`, once `drain` began, and while it restarts after a failure."""
        return self._runner is not None and self._runner.alive()

    async def drain(self, grace: float) -> None:
        """For SIGTERM: take no more jobs, let the running ones finish within `grace` seconds, then
        cancel those still running, which puts them back in the queue where another process runs
        them again from the start. Returns once the worker has stopped; nothing without a worker."""
        if self._runner is not None:
            await self._runner.drain(grace)

    async def aclose(self) -> None:
        """Drain with no grace if `drain` was not called, then close the pool."""
        if self._closed:
            return
        await self.drain(0)
        self._closed = True
        await self.app.close_async()
        await self.pool.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the jobs on {self.where} are closed")


def queue_for(schema: str) -> str:
    """The prefix of the queues of the deployment in `schema`; short, since a queue's name is part
    of a NOTIFY channel name (63 bytes at most)."""
    return "nerve-" + hashlib.blake2b(schema.encode(), digest_size=4).hexdigest()

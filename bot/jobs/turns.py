"""`TurnJobs`: received messages as procrastinate jobs, shared by every nerve process on a database.

procrastinate's `queueing_lock` (the event id) makes a re-delivery before the job started add nothing,
and its `lock` (the conversation) runs one job of a conversation at a time, in order. One queue per
schema and platform (`queue_of`): a worker takes only jobs it has handlers for, and two deployments in
two schemas of one database never touch each other's. procrastinate's tables are installed at start-up
under the lock nerve's migrations take, by one of the replicas starting together; an installed schema
is left as it is (a newer procrastinate's migrations are an operator's upgrade)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import psycopg
from procrastinate import App, BaseRetryStrategy, PsycopgConnector, RetryDecision
from procrastinate import exceptions as procrastinate_errors
from procrastinate.jobs import Job
from procrastinate.schema import SchemaManager
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bot.errors import StoreError
from bot.jobs import JobHandler
from bot.jobs.recovery import WakingJobManager
from bot.jobs.worker import WorkerRunner
from bot.store.postgres import CONNECT_TIMEOUT_SECONDS, describe, postgres_error
from bot.store.postgres_connection import SteadyPool, lock_key
from bot.store.postgres_migrate import MIGRATION_LOCKS, current_schema

logger = logging.getLogger(__name__)

# Connections procrastinate uses: short statements (fetch, finish, heartbeat), plus one LISTEN
# session of its own outside the pool. The handlers' own database work goes through the store.
POOL_SIZE = 5
POOL_WAIT_SECONDS = 30.0
DEFAULT_STALL_TIMEOUT = 30.0
DEFAULT_POLL_INTERVAL = 5.0


class RunAgainIfCutOff(BaseRetryStrategy):
    """A job cut off by a drain goes back to the queue at once; one whose handler raised does not (its
    handler has told the person already)."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        return RetryDecision() if isinstance(exception, asyncio.CancelledError) else None


@dataclass(eq=False)
class TurnJobs:
    """The jobs of one nerve deployment; `queue` prefixes its queues (for `procrastinate` commands)."""

    app: App
    pool: AsyncConnectionPool[Any]
    _: KW_ONLY
    schema: str
    where: str
    stall_timeout: float
    poll_interval: float

    def __post_init__(self) -> None:
        # Short, since it is part of a NOTIFY channel's name.
        self.queue = "nerve-" + hashlib.blake2b(self.schema.encode(), digest_size=4).hexdigest()
        self._runner: WorkerRunner | None = None
        self._queues: set[str] = set()  # those of the names registered here
        self._closed = False

    @classmethod
    async def open(
        cls,
        database_url: str,
        *,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> TurnJobs:
        """In the schema the URL's search_path gives; `stall_timeout` is NERVE_WORKER_STALL_TIMEOUT."""
        where = describe(database_url)
        kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
        try:
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True, **kwargs) as conn:
                if await install_schema(conn):
                    logger.info("installed procrastinate's tables on %s", where)
                schema = await current_schema(conn)
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
            app, pool, schema=schema, where=where, stall_timeout=stall_timeout, poll_interval=poll_interval
        )

    def register(self, name: str, handler: JobHandler) -> None:
        """`name`: `<platform>.<what>`; a platform's jobs share a queue, so a process registers them all."""
        if name in self.app.tasks:
            raise ValueError(f"a handler for jobs named {name!r} is registered already")
        self._queues.add(self.queue_of(name))

        async def run(**payload: Any) -> None:
            # Always a coroutine function, so procrastinate cancels it (not a thread) on a drain.
            await handler(**payload)

        self.app.task(name=name, queue=self.queue_of(name), retry=RunAgainIfCutOff(), pass_context=False)(run)

    def queue_of(self, name: str) -> str:
        return f"{self.queue}-{name.partition('.')[0]}"

    async def enqueue(
        self, name: str, payload: Mapping[str, str], *, event: str, conversation: str, priority: int = 0
    ) -> bool:
        """False if one for `event` (the delivery's id, prefixed by platform: `chat:Ev123`) is still
        waiting to start: a re-delivery racing the first in another process, past nerve's inbox. A
        free worker takes the waiting job of highest `priority` first (then the oldest)."""
        self._check_open()
        deferrer = self.app.configure_task(
            name, queue=self.queue_of(name), lock=conversation, queueing_lock=event, priority=priority
        )
        try:
            await deferrer.defer_async(**payload)
        except procrastinate_errors.AlreadyEnqueued:
            return False
        except procrastinate_errors.ConnectorException as exc:
            raise StoreError(f"could not queue a job on {self.where}: {exc}") from exc
        return True

    async def pending(self, event: str) -> bool:
        """A job for `event` is waiting or running: recovery queues only deliveries recorded without one."""
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
        """Up to `concurrency` jobs at once, of the queues registered so far."""
        self._check_open()
        if self._runner is not None:
            raise RuntimeError("this process's worker was started already")
        queues = tuple(sorted(self._queues))
        if not queues:
            raise RuntimeError("register the handlers of this process's jobs before running its worker")
        self._runner = WorkerRunner(
            self.app, queues, concurrency, stall_timeout=self.stall_timeout, poll_interval=self.poll_interval
        )
        self._runner.start()

    def worker_alive(self) -> bool:
        """This process's worker is registered and taking jobs (for /readyz)."""
        return self._runner is not None and self._runner.alive()

    async def drain(self, grace: float) -> None:
        """For SIGTERM: the running jobs get `grace` seconds, then go back to the queue."""
        if self._runner is not None:
            await self._runner.drain(grace)

    async def aclose(self) -> None:
        if self._closed:
            return
        await self.drain(0)
        self._closed = True
        await self.app.close_async()
        await self.pool.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the jobs on {self.where} are closed")


async def install_schema(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Unless its jobs table is in the connection's schema (not one further along the search_path)."""
    schema = await current_schema(conn)
    key = lock_key(MIGRATION_LOCKS, schema)
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", key)
    try:
        cursor = await conn.execute(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = %s",
            (schema, "procrastinate_jobs"),
        )
        if await cursor.fetchone() is not None:
            return False
        # Without parameters psycopg sends the whole script as it is, statements and `%` alike.
        async with conn.transaction():
            await conn.execute(SchemaManager.get_schema())
        return True
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)

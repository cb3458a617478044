"""One procrastinate worker inside a nerve process, kept running until drained: a task next to the
front end, which owns SIGTERM and calls `drain`. A worker that fails is started again as a new one (a
failure to reach the database is one line of the outage's, `bot.store.postgres_outage`); every worker
recovers dead workers' jobs (`bot.jobs.recovery`); a draining worker keeps beating until its last job
ends; a job's end is recorded until it lands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import KW_ONLY, dataclass
from typing import Any

from procrastinate import App
from procrastinate.worker import Worker

from bot.jobs.recovery import keep_recovering, raise_if_cancelled
from bot.store.postgres_outage import OUTAGE, unreachable_reason

logger = logging.getLogger(__name__)

# A failed worker is started again after this pause, doubling up to the longest.
RESTART_PAUSE = 1.0
RESTART_PAUSE_LONGEST = 30.0
# A worker that stops on its own (a failure) waits this long for its running jobs.
FAILURE_GRACE = 10.0
# Beyond its grace, a drain gives the worker this long to record its jobs' ends and sign off; then
# it cancels the worker, again each second until it has stopped.
DRAIN_ALLOWANCE = 15.0
# A job's end that could not be recorded is tried again after this pause, doubling up to the longest.
FINISH_PAUSE = 0.25
FINISH_PAUSE_LONGEST = 4.0
# What the database says when asked to end a job whose end is already recorded (a lost reply).
_ALREADY_ENDED = "Job was not found or"


class FinishingWorker(Worker):
    """procrastinate records a job's end once: lost, the job would stay `doing` under this live worker,
    which recovery never takes for dead, and its conversation locked until a restart. So it is tried
    again until it lands; a stopping worker gives up, and its pruned registration hands the job on."""

    async def _persist_job_status(self, *args: Any, **kwargs: Any) -> None:
        pause = FINISH_PAUSE
        tried = False
        while True:
            try:
                await super()._persist_job_status(*args, **kwargs)  # type: ignore[no-untyped-call]
                return
            except Exception as exc:
                if tried and _ALREADY_ENDED in _messages(exc):
                    return  # the earlier try landed; only its reply was lost
                reason = unreachable_reason(exc)
                if reason is None:
                    raise
                if self._stop_event.is_set():
                    logger.warning("a job's end could not be recorded before stopping (%s)", reason)
                    return
            tried = True
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._stop_event.wait()
            pause = min(pause * 2, FINISH_PAUSE_LONGEST)


def _messages(exc: BaseException | None) -> str:
    found: list[str] = []
    while exc is not None and len(found) < 5:
        found.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return " | ".join(found)


@dataclass(eq=False)
class WorkerRunner:
    """A worker task that keeps going until `drain`."""

    app: App
    queues: tuple[str, ...]
    concurrency: int
    _: KW_ONLY
    stall_timeout: float
    # Seconds between two looks for jobs when no notification came (a fallback: inserts notify).
    poll_interval: float
    name: str = "nerve"

    def __post_init__(self) -> None:
        self._worker: Worker | None = None
        self._draining = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="nerve jobs worker")

    def alive(self) -> bool:
        """A worker is registered in the database and fetching jobs (not draining, not restarting)."""
        running = self._task is not None and not self._task.done() and not self._draining.is_set()
        return running and bool(self._own_workers())

    async def drain(self, grace: float) -> None:
        """The running jobs get `grace` seconds, then go back to the queue; returns once stopped."""
        self._draining.set()
        if self._task is None:
            return
        worker = self._worker
        beating: asyncio.Task[None] | None = None
        if worker is not None:
            beating = asyncio.create_task(
                self._beat_while_draining(worker), name="nerve jobs drain heartbeat"
            )
            worker.shutdown_graceful_timeout = grace
            worker.stop()  # type: ignore[no-untyped-call]
        try:
            await self._stopped(self._task, grace + DRAIN_ALLOWANCE)
        finally:
            if beating is not None:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating

    @staticmethod
    async def _stopped(task: asyncio.Task[None], within: float) -> None:
        """Then cancelled until it ends, as a process told to stop must: procrastinate's abort waits,
        unbounded, for jobs that swallow their cancel. Not `await task`: a drain cancelled by its caller
        must not read as the worker's end."""
        done, _ = await asyncio.wait({task}, timeout=within)
        if done:
            return
        logger.warning("the job worker had not stopped %.0f s after it was told to; cancelling it", within)
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)

    async def _beat_while_draining(self, worker: Worker) -> None:
        """procrastinate stops beating as soon as a worker stops: a grace longer than the stall
        timeout would have others take this one for dead and run its jobs a second time."""
        interval = self.stall_timeout / 3
        while True:
            worker_id = worker.worker_id
            if worker_id is not None:
                try:
                    await self.app.job_manager.update_heartbeat(worker_id)
                except Exception as exc:
                    raise_if_cancelled(exc)
                    logger.warning("could not send the draining worker's heartbeat: %s", exc)
            await asyncio.sleep(interval)

    async def _supervise(self) -> None:
        pause = RESTART_PAUSE
        loop = asyncio.get_running_loop()
        while not self._draining.is_set():
            began, outages_ended = loop.time(), OUTAGE.ended
            unreachable: str | None = None
            try:
                await self._run_once()
            except Exception as exc:
                unreachable = unreachable_reason(exc)
                if unreachable is None:
                    logger.exception("the job worker failed; starting it again in %.0f s", pause)
                elif OUTAGE.ended != outages_ended and not OUTAGE.unreachable:
                    # A connection dropped in the outage that has ended since, reported late (the
                    # listener's): that outage was said, and the database is back.
                    unreachable = None
            else:
                if not self._draining.is_set() and not OUTAGE.unreachable:
                    logger.warning("the job worker stopped on its own; starting it again in %.0f s", pause)
            if unreachable is not None or OUTAGE.unreachable:
                OUTAGE.unreachable_now(unreachable or "the job worker could not reach it")
                pause = RESTART_PAUSE
            await self._pause(pause)
            # A worker that failed again at once waits longer each time; one that ran a while, not.
            ran_a_while = loop.time() - began > RESTART_PAUSE_LONGEST + pause
            pause = RESTART_PAUSE if ran_a_while else min(pause * 2, RESTART_PAUSE_LONGEST)

    async def _pause(self, seconds: float) -> None:
        """Between two workers: over at once on a drain. Its own method so that the pauses a long
        outage brings can be counted rather than timed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._draining.wait()

    def _own_workers(self) -> list[int]:
        """This process's registered worker, which its own recovery never takes for dead."""
        worker = self._worker
        return [worker.worker_id] if worker is not None and worker.worker_id is not None else []

    async def _run_once(self) -> None:
        worker = FinishingWorker(
            app=self.app,
            queues=list(self.queues),
            name=self.name,
            concurrency=self.concurrency,
            fetch_job_polling_interval=self.poll_interval,
            shutdown_graceful_timeout=FAILURE_GRACE,
            delete_jobs="successful",
            install_signal_handlers=False,
            update_heartbeat_interval=self.stall_timeout / 3,
            stalled_worker_timeout=self.stall_timeout,
        )
        self._worker = worker
        recovery = asyncio.create_task(
            keep_recovering(
                self.app, queues=self.queues, stall_timeout=self.stall_timeout, own=self._own_workers
            ),
            name="nerve jobs recovery",
        )
        try:
            await worker.run()  # type: ignore[no-untyped-call]
        finally:
            await _cancelled(recovery)
            self._worker = None


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancelled again each second until it ends: a cancel that lands inside a database call can be
    swallowed there (the driver's own timeout takes it back), and a worker whose recovery loop went on
    would never be started again after an outage."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()

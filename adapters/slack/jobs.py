"""Slack's work as jobs shared by every nerve process on one PostgreSQL database (`bot.jobs`).

The receiving process records an event in the inbox and queues a job; whichever worker is free runs
it (`adapters.jobs_runtime`: an event, a parked turn going on, the messages that waited behind it).
A thread's jobs never overlap, and a job cut off by a dying process runs again elsewhere
(`adapters.slack.post` keeps its answer from being posted twice). Without jobs (SQLite, one
process), `Launcher` runs the same work as tasks here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters import jobs_runtime
from adapters.common.tasks import Spawn
from adapters.jobs_runtime import EVENT, job_name

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

__all__ = ["EVENT_JOB", "Launcher", "event_lock"]

PLATFORM = "slack"
EVENT_JOB = job_name(PLATFORM, EVENT)


def event_lock(event_id: str) -> str:
    """The queueing lock of a Slack event's job: one waiting job per event, across platforms."""
    return jobs_runtime.event_lock(PLATFORM, event_id)


class Launcher(jobs_runtime.Launcher):
    """Where Slack work runs: as a job any process takes (PostgreSQL), or a task here (SQLite)."""

    def __init__(self, jobs: TurnJobs | None, spawn: Spawn) -> None:
        super().__init__(jobs, spawn, PLATFORM)

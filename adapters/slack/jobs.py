"""Slack's work as jobs that every nerve process on one PostgreSQL database shares (`bot.jobs`).

With NERVE_DATABASE_URL set, the process Slack delivers an event to records it in the inbox (as
always: nothing a person writes is lost) and queues a job; the worker of whichever process is free
answers it. Three kinds of job (`adapters.jobs_runtime`), each run by `SlackBot`'s own code:

- `slack.event`: answer one recorded event (`SlackBot.answer_event`);
- `slack.resume`: go on with a parked turn once its request is decided, expired or signed in;
- `slack.deferred`: answer the messages that waited behind a parked turn.

A job of one thread never overlaps another of that thread (procrastinate's lock per conversation),
and a job cut off by a dying process runs again elsewhere: `adapters.slack.post` keeps its answer
from being posted twice. Without jobs (SQLite, one process), `Launcher` runs the same work as
tasks of this process.
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

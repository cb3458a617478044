"""Slack's work as jobs shared by every nerve process on one PostgreSQL database (`bot.jobs`).

A thread's jobs never overlap, and a job cut off by a dying process runs again elsewhere
(`adapters.slack.post` keeps its answer from being posted twice).
"""

from __future__ import annotations

from adapters import jobs_runtime
from adapters.jobs_runtime import EVENT, job_name

__all__ = ["EVENT_JOB", "event_lock"]

PLATFORM = "slack"
EVENT_JOB = job_name(PLATFORM, EVENT)


def event_lock(event_id: str) -> str:
    """The queueing lock of a Slack event's job: one waiting job per event, across platforms."""
    return jobs_runtime.event_lock(PLATFORM, event_id)

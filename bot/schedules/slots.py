"""The words a look at the schedules and the run of a slot speak in: what a look found, how a run
ended, the front end's part, the shared jobs, and the lock one run is held under.

Apart from the runner because both its halves use them (the looks, `bot.schedules.runner`, and the
runs, `bot.schedules.runs`), as do the façade and the schedule tools, none of which needs either half.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from bot.types import ConversationKey, Schedule

# Seconds after its time a slot nothing ran is still run, late (NERVE_SCHEDULE_GRACE).
DEFAULT_GRACE = 3600.0

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a scheduled run's turn ended, as the front end that ran it saw it."""

    status: Literal["answered", "failed"]
    note: str | None = None


# The front end's part: run `schedule`'s turn for `slot`, `late_by` seconds after it was due.
Start = Callable[[Schedule, float, float], Awaitable[RunOutcome]]


@dataclass(frozen=True, slots=True)
class Started:
    schedule: Schedule
    slot: float
    late_by: float


@dataclass(slots=True)
class Tick:
    """What one look found: the runs it started (with jobs: queued), and the slots it recorded as
    missed; or the runs a stopped process left that were handed on here (with jobs: queued again)."""

    started: list[Started] = field(default_factory=list)
    missed: list[tuple[Schedule, float]] = field(default_factory=list)
    # Runs a stopped process left, started again here (they go on in the same message).
    handed_on: list[Started] = field(default_factory=list)
    # With jobs: the due slots queued by this look, for whichever process's worker is free.
    queued: list[Started] = field(default_factory=list)
    # The soonest slot still to come of the schedules looked at: the next look is then, if sooner
    # than the cadence, so a run starts at its time rather than up to a cadence late.
    next_due: float | None = None


class SlotJobs(Protocol):
    """Slots run as jobs that every process on the database shares (`adapters.jobs_runtime`); each
    job calls `ScheduleRunner.run_slot` in whichever process takes it."""

    async def defer(self, schedule_id: str, slot: float) -> bool:
        """Queue the job of one slot: False when one is waiting or running already (its queueing
        lock is the run's), which is no error. Raises StoreError when the jobs cannot be reached."""
        ...


def run_lock_key(schedule_id: str, slot: float) -> ConversationKey:
    """The turn-lock name one run is held under while its process runs it."""
    return ConversationKey(platform="schedule-run", workspace=schedule_id, channel=repr(slot), thread="")

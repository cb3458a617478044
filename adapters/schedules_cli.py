"""`nerve schedules`: the prompts people asked nerve to run later, for whoever runs it: every
schedule still in effect or one person's, each with its place, next run and last run; and an
operator's `cancel`, `pause` and `resume`. It reads the store alone: no model, no servers. A running
nerve sees a change at its next look at the schedules (within seconds)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from adapters.common.schedules import ScheduleView
from adapters.terminal.safe import say, terminal_json
from bot.config import Settings
from bot.store.choose import open_configured_store
from bot.types import Person, ScheduleStatus

Job = Callable[[Settings], Coroutine[Any, Any, int]]
Action = Literal["cancel", "pause", "resume"]

# Who a change from the command line is recorded as (a schedule keeps who last changed it).
OPERATOR = "operator"
# What each action makes of a schedule, from which statuses, and how it is told.
_ACTIONS: dict[Action, tuple[ScheduleStatus, tuple[ScheduleStatus, ...], str]] = {
    "cancel": ("cancelled", ("active", "paused"), "Cancelled"),
    "pause": ("paused", ("active",), "Paused"),
    "resume": ("active", ("paused",), "Resumed"),
}


def list_job(person: Person | None, *, as_json: bool) -> Job:
    """`nerve schedules [--user ID] [--json]`: oldest first."""

    async def job(settings: Settings) -> int:
        now = time.time()
        async with await open_configured_store(settings) as store:
            found = await store.schedules_of(person.id) if person else await store.all_schedules()
            views = []
            for schedule in found:
                last = await store.runs_of(schedule.id, 1)
                views.append(ScheduleView(schedule, last[0] if last else None, now))
        if as_json:
            sys.stdout.write(terminal_json({"schedules": [view.as_json() for view in views]}) + "\n")
            return 0
        if not views:
            say(f"No schedules{f' of {person.id}' if person else ''}.")
            return 0
        for view in views:
            say(view.line() + ("" if person else f" — by {view.schedule.owner}"))
        say("Change one with: nerve schedules cancel|pause|resume ID")
        return 0

    return job


def change_job(action: Action, schedule_id: str) -> Job:
    """`nerve schedules cancel|pause|resume ID`: whoever's it is; the operator answers for the
    deployment (a person changes only their own, in the chat)."""
    status, allowed, done = _ACTIONS[action]

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            schedule = await store.schedule(schedule_id.strip())
            if schedule is None:
                say(f"nerve: no schedule with id {schedule_id!r} (see: nerve schedules)", sys.stderr)
                return 1
            if schedule.status not in allowed or not await store.set_schedule_status(
                schedule.id, status, by=OPERATOR
            ):
                say(f"nerve: {schedule.id} is {schedule.status}: it cannot be {action}d", sys.stderr)
                return 1
        say(f"{done} {schedule.id} ({schedule.owner}): {schedule.prompt}")
        return 0

    return job

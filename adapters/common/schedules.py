"""How schedules read on every surface: the note under a scheduled run's answer, the note of a late
run ("due at 09:00, run at 09:17"), and one schedule as a list shows it (prompt, place, next run in
its zone, last run and its outcome). Words only: each surface draws them its own way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.agent import Agent, local_time, upcoming_runs
from bot.errors import ScheduleError
from bot.types import Person, Schedule, ScheduleChange, ScheduleRun

# A run at most this late (seconds) is on time: the runner looks every 15 seconds or so.
ON_TIME = 60.0


def scheduled_note(schedule_id: str, command: str) -> str:
    """Under a scheduled run's answer: that it is one, and how to stop it (`command` as the surface
    writes its schedules command: "/schedules", "/nerve schedules")."""
    return f"Scheduled run ({schedule_id}) — stop it with {command} cancel {schedule_id}"


def _clock(instant: float, timezone: str) -> str:
    return datetime.fromtimestamp(instant, ZoneInfo(timezone)).strftime("%H:%M")


def late_note(slot: float, late_by: float, timezone: str) -> str | None:
    """ "due at 09:00, run at 09:17" for a run that started late, in the schedule's zone; None on time."""
    if late_by < ON_TIME:
        return None
    return f"due at {_clock(slot, timezone)}, run at {_clock(slot + late_by, timezone)}"


def place_of(schedule: Schedule) -> str:
    """Where its runs answer, as a person reads it."""
    if schedule.place:
        return schedule.place
    key = schedule.key
    if key.platform == "terminal":
        return f"thread {key.thread}"
    return f"{key.platform} {key.channel}" + (f" thread {key.thread}" if key.thread else "")


def next_run_text(schedule: Schedule, now: float) -> str:
    """When it runs next, in its own zone; why not, when it will not."""
    if schedule.status != "active":
        return schedule.status
    try:
        upcoming = upcoming_runs(schedule, now, 1)
        return local_time(upcoming[0], schedule.timezone) if upcoming else "no more runs"
    except ScheduleError as exc:
        # Its zone or rule is one this machine cannot work out (older zone data): the list still
        # shows it, and every other schedule.
        return f"unknown here ({exc})"


def last_run_text(run: ScheduleRun | None, timezone: str) -> str:
    """Its newest slot and how it went: "Mon 7 Dec 09:00 CET answered (due at 09:00, run at 09:17)"."""
    if run is None:
        return "not run yet"
    notes = [note for note in (late_note(run.slot, run.late_by, timezone), run.note) if note]
    if run.status == "missed":
        notes = []
    said = f" ({'; '.join(notes)})" if notes else ""
    return f"{local_time(run.slot, timezone)} {run.status}{said}"


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """One schedule as a list shows it."""

    schedule: Schedule
    last: ScheduleRun | None
    now: float

    @property
    def repeats(self) -> str:
        return self.schedule.rule or "once"

    def line(self) -> str:
        s = self.schedule
        return (
            f"{s.id} [{s.status}] {s.prompt!r} — {place_of(s)}, {self.repeats} ({s.timezone});"
            f" next: {next_run_text(s, self.now)}; last: {last_run_text(self.last, s.timezone)}"
        )

    def as_json(self) -> dict[str, Any]:
        s, last = self.schedule, self.last
        upcoming = upcoming_runs(s, self.now, 1) if s.status == "active" else []
        return {
            "id": s.id,
            "owner": s.owner,
            "status": s.status,
            "prompt": s.prompt,
            "place": place_of(s),
            "conversation": str(s.key),
            "repeat": s.rule,
            "timezone": s.timezone,
            "first_at": s.first_at,
            "next_run": upcoming[0] if upcoming else None,
            "next_run_local": next_run_text(s, self.now),
            "last_run": None
            if last is None
            else {
                "slot": last.slot,
                "status": last.status,
                "late_by": last.late_by,
                "note": last.note,
                "local": last_run_text(last, s.timezone),
            },
        }


async def views_of(agent: Agent, owner: str, now: float) -> list[ScheduleView]:
    """A person's schedules still in effect, each with its newest run, as a list shows them."""
    views = []
    for schedule in await agent.schedules_of(owner):
        runs = await agent.schedule_runs(schedule.id, 1)
        views.append(ScheduleView(schedule, runs[0] if runs else None, now))
    return views


NO_SCHEDULES = (
    'You have no schedules. Ask me for one ("remind me tomorrow at 9 to …", "every weekday at 09:00 …").'
)
# What a person may do to one of their schedules, and how the answer says it was done.
CHANGES = {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}


async def change_schedule(agent: Agent, action: str, schedule_id: str, by: Person, list_command: str) -> str:
    """Cancel, pause or resume (`action`, one of `CHANGES`) a schedule as `by`; what they are told."""
    change = {
        "cancel": agent.cancel_schedule,
        "pause": agent.pause_schedule,
        "resume": agent.resume_schedule,
    }[action]
    return change_text(await change(schedule_id, by), schedule_id, CHANGES[action], list_command)


def change_text(change: ScheduleChange, schedule_id: str, done: str, list_command: str) -> str:
    """What a person is told after asking to pause, resume or cancel a schedule."""
    if change == "changed":
        return f"{done} {schedule_id}."
    if change == "not_yours":
        return f"{schedule_id} is not yours to change."
    return f"No schedule {schedule_id} that can be {done.lower()} (see {list_command})."


# What `timezone` takes to go back to the default zone (the platform's, or the machine's).
RESET_WORDS = frozenset({"reset", "default"})


async def time_zone_command(
    agent: Agent, person: Person, argument: str, command: str, *, hint: str | None = None, now: float
) -> str:
    """`timezone [ZONE|reset]`, as every surface answers it (`command` as the surface writes it:
    "/timezone", "/nerve timezone"): the zone in effect, or set it, or back to the default; a name
    that is no IANA zone gets what to write instead. `hint` is the zone the platform reports."""
    name = argument.strip()
    if not name:
        zone = await agent.time_zone_of(person, hint)
        return (
            f"Your time zone is {zone} (it is {local_time(now, zone)} there). Your schedules' times are"
            f" read and shown in it. Change it with {command} ZONE (an IANA name such as Europe/Paris),"
            f" or {command} reset for the default."
        )
    try:
        zone = await agent.set_time_zone(person, None if name.lower() in RESET_WORDS else name)
    except ScheduleError as exc:
        return str(exc)
    if name.lower() in RESET_WORDS:
        zone = await agent.time_zone_of(person, hint)
        return f"Your time zone is back to the default: {zone}."
    return f"Your time zone is now {zone}: your schedules' times are read and shown in it."

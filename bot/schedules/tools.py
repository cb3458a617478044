"""The built-in tools `schedule`, `list_schedules` and `cancel_schedule`: run in-process, never by an
MCP server, because only the core knows for certain who asks and where (`CallContext.incoming`).

A schedule acts later as its person, so nothing is scheduled on the model's word alone: a valid
`schedule` call is always held for its person to confirm (`proposal`, from the turn's screen), with
a card showing the prompt, the place and the next three run times in their time zone; only a call
that comes back approved (`CallContext.approved`) stores it. A person lists and cancels only their
own schedules, and in a shared place sees only those made there.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.errors import ScheduleError
from bot.mcp.auth.people import person_of
from bot.policy.platforms import Platforms
from bot.schedules import timing
from bot.schedules.slots import DEFAULT_GRACE
from bot.store.schedules import ScheduleLedger, new_schedule_id
from bot.types import CallContext, CallSummary, Incoming, Proposal, Schedule, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

SCHEDULES_SERVER = "schedules"
MAX_PROMPT_CHARS = 2000
# How many run times a card and a listing show.
SHOWN_SLOTS = 3
DEFAULT_PER_PERSON = 20

NEEDS_CONFIRMATION = "a schedule is made only when its person confirms it, and nobody could be asked here"

SPECS = (
    ToolSpec(
        name="schedule",
        description=(
            "Run a prompt later, once or repeatedly, as the person asking (a reminder, a recurring "
            "check). The person confirms it before it is saved."
        ),
        parameters={
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "maxLength": MAX_PROMPT_CHARS,
                    "description": "what to do when it runs, in the person's words (e.g. remind me to …)",
                },
                "at": {
                    "type": "string",
                    "description": "first run, ISO 8601 date-time (2026-12-08T09:00); "
                    "without an offset it is wall time in `timezone`",
                },
                "repeat": {
                    "type": "string",
                    "description": f"RFC 5545 RRULE ({timing.EXAMPLE}), or empty to run once",
                },
                "timezone": {
                    "type": "string",
                    "description": "IANA time zone (Europe/Paris), or empty for the person's own",
                },
            },
            "required": ["prompt", "at", "repeat", "timezone"],
            "additionalProperties": False,
        },
        server=SCHEDULES_SERVER,
        original_name="schedule",
    ),
    ToolSpec(
        name="list_schedules",
        description="List the person's schedules (reminders and recurring prompts) with their next runs.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
        server=SCHEDULES_SERVER,
        original_name="list_schedules",
    ),
    ToolSpec(
        name="cancel_schedule",
        description="Cancel one of the person's schedules by its id (find it with list_schedules first).",
        parameters={
            "type": "object",
            "properties": {"schedule_id": {"type": "string"}},
            "required": ["schedule_id"],
            "additionalProperties": False,
        },
        server=SCHEDULES_SERVER,
        original_name="cancel_schedule",
    ),
)
NAMES = frozenset(spec.name for spec in SPECS)

# The person's time zone for a turn's message (`Agent.time_zone_of`).
ZoneOf = Callable[[Incoming], Awaitable[str]]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A `schedule` call checked: what would be stored, and how its card reads."""

    prompt: str
    first_at: float
    rule: str
    timezone: str
    # The person's own zone, which the card shows the run times in.
    person_zone: str
    place: str

    def arguments(self) -> dict[str, Any]:
        """The call's arguments as they run once confirmed: the zone and the time pinned as shown."""
        wall = datetime.fromtimestamp(self.first_at, timing.zone(self.timezone))
        return {
            "prompt": self.prompt,
            "at": wall.isoformat(timespec="seconds"),
            "repeat": self.rule,
            "timezone": self.timezone,
        }

    def summary(self) -> CallSummary:
        """The confirmation card: the prompt, where it runs, the next run times and the zone, named."""
        slots = timing.next_slots(self.first_at, self.rule, self.timezone, self.first_at - 1, SHOWN_SLOTS)
        times = [timing.local_text(slot, self.person_zone) for slot in slots]
        lines = [f"Prompt: {self.prompt}", f"Where: {self.place}"]
        if self.rule:
            lines.append(f"Repeats: {self.rule}")
            lines.append("Next runs: " + "; ".join(times))
        else:
            lines.append(f"Runs once: {times[0] if times else '—'}")
        lines.append(f"Time zone: {self.person_zone}")
        if self.timezone != self.person_zone:
            lines.append(f"(It follows the wall clock of {self.timezone}.)")
        return CallSummary(icon="⏰", headline="Schedule this?", text="\n".join(lines))


# The platforms whose front ends run schedules, where the tools are offered; None: every platform
# (each front end runs its own). A deployment that runs none on a platform names the others.
RUNS_ON: frozenset[str] | None = None


class ScheduleTools:
    """The three tools over the schedule ledger, for whichever turn calls them."""

    def __init__(
        self,
        ledger: ScheduleLedger,
        *,
        platforms: Platforms,
        zone_of: ZoneOf,
        clock: Clock,
        per_person: int = DEFAULT_PER_PERSON,
        on_added: Callable[[Schedule], None] | None = None,
        runs_on: frozenset[str] | None = RUNS_ON,
        # A once schedule whose time passed while its person was confirming it still runs (at once)
        # when it is at most this late (seconds: the schedules' grace); later, it is refused as past.
        confirm_late: float = DEFAULT_GRACE,
    ) -> None:
        self.ledger = ledger
        self._confirm_late = confirm_late
        self._runs_on = runs_on
        # Told of each schedule made (a runner woken, so a slot minutes away is not run late).
        self._on_added = on_added
        self._platforms = platforms
        self._zone_of = zone_of
        self._clock = clock
        self._per_person = per_person

    def list_tools(self) -> list[ToolSpec]:
        return list(SPECS)

    def offered_in(self, incoming: Incoming) -> bool:
        """Only where a front end runs schedules: a reminder confirmed where none runs would never
        fire."""
        return self._runs_on is None or incoming.key.platform in self._runs_on

    def starting(self) -> list[str]:
        return []

    async def prompt_note(self, incoming: Incoming) -> str:
        """The system prompt's line saying what time it is, and in which zone the person lives: a
        model cannot turn "in 20 minutes" or "tomorrow at 9" into a date-time without them. A
        scheduled run's turn also says what it is: its message reads like a request to schedule
        ("Remind me to …"), and a model that took it for one would schedule it again."""
        line = now_line(self._clock(), await self._zone_of(incoming))
        return line if incoming.scheduled is None else f"{line}\n{scheduled_line(incoming.scheduled)}"

    def confirmed(self, spec: ToolSpec) -> bool:
        """Whether this tool's calls always wait for their requester's own confirmation."""
        return spec.server == SCHEDULES_SERVER and spec.original_name == "schedule"

    async def proposal(self, arguments: dict[str, Any], incoming: Incoming) -> Proposal | ToolResult:
        """A `schedule` call checked before its person is asked: what to ask, or the refusal the model
        reads at once (a bad time, rule or zone, a time past, too many schedules)."""
        if problem := _prompt_problem(arguments):
            return _refused(problem, "arguments")
        try:
            plan = await self._plan(arguments, incoming, late=0.0)
        except ScheduleError as exc:
            return _refused(exc.message, "arguments")
        if refusal := await self._over_limit(incoming):
            return refusal
        return Proposal(arguments=plan.arguments(), summary=plan.summary())

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        incoming = context.incoming if context is not None else None
        if incoming is None:
            return _refused("schedules are only available in a conversation", "execution")
        if name == "schedule":
            if context is None or not context.approved:
                return _refused(f"not scheduled: {NEEDS_CONFIRMATION}", "execution")
            return await self._schedule(arguments, incoming)
        if name == "list_schedules":
            return await self._list(incoming)
        if name == "cancel_schedule":
            return await self._cancel(str(arguments.get("schedule_id", "")), incoming)
        return _refused(f"there is no schedules tool named {name!r}", "unknown_tool")

    async def _plan(self, arguments: dict[str, Any], incoming: Incoming, *, late: float) -> Plan:
        """The call checked with `bot.schedules.timing`; ScheduleError saying what to write instead."""
        prompt = " ".join(str(arguments.get("prompt", "")).split())
        person_zone = await self._zone_of(incoming)
        named = str(arguments.get("timezone", "")).strip()
        timezone = named or person_zone
        timing.zone(timezone)
        rule = timing.parse_rule(str(arguments.get("repeat", "")))
        first_at = timing.parse_at(str(arguments.get("at", "")), timezone, repeating=bool(rule))
        # In a thread: a rule that matches rarely or never makes dateutil walk years of dates, seconds
        # of CPU that would stall every other turn of the process.
        await asyncio.to_thread(timing.check_spacing, first_at, rule, timezone)
        now = self._clock()
        if first_at <= now - late:
            raise ScheduleError(
                f"{timing.local_text(first_at, timezone)} is in the past (it is now"
                f" {timing.local_text(now, timezone)}): give a later time",
                field="at",
            )
        place = place_name(incoming, self._platforms)
        return Plan(
            prompt=prompt,
            first_at=first_at,
            rule=rule,
            timezone=timezone,
            person_zone=person_zone,
            place=place,
        )

    async def _over_limit(self, incoming: Incoming) -> ToolResult | None:
        owner = self._owner(incoming)
        if await self.ledger.count_active_schedules(owner) >= self._per_person:
            return _refused(
                f"you already have {self._per_person} schedules, the most one person may have:"
                " cancel one first (list_schedules shows them)",
                "execution",
            )
        return None

    async def _schedule(self, arguments: dict[str, Any], incoming: Incoming) -> ToolResult:
        if problem := _prompt_problem(arguments):
            return _refused(problem, "arguments")
        try:
            # Confirmed as shown: a time that passed while its person was deciding runs at once.
            plan = await self._plan(arguments, incoming, late=self._confirm_late)
        except ScheduleError as exc:
            return _refused(exc.message, "arguments")
        now = self._clock()
        if twin := await self._same_made_before(plan, incoming):
            # The confirmed call run again (its turn resumed a second time after a crash): the
            # schedule it made already stands; a second would run every slot twice.
            made = described(twin, now, plan.person_zone) | {"scheduled": True}
            return ToolResult(content=json.dumps(made, ensure_ascii=False), structured=made)
        if refusal := await self._over_limit(incoming):
            return refusal
        schedule = Schedule(
            id=new_schedule_id(),
            owner=self._owner(incoming),
            owner_user=incoming.user_id,
            key=incoming.key,
            place=plan.place,
            prompt=plan.prompt,
            first_at=plan.first_at,
            rule=plan.rule,
            timezone=plan.timezone,
            status="active",
            created_at=now,
        )
        await self.ledger.add_schedule(schedule)
        if self._on_added is not None:
            self._on_added(schedule)
        logger.info("schedule %s made (%s)", schedule.id, "repeating" if plan.rule else "once")
        made = described(schedule, now, plan.person_zone) | {"scheduled": True}
        return ToolResult(content=json.dumps(made, ensure_ascii=False), structured=made)

    async def _same_made_before(self, plan: Plan, incoming: Incoming) -> Schedule | None:
        """This person's schedule in effect here with the same prompt, times and zone, if any."""
        for schedule in await self.ledger.schedules_of(self._owner(incoming)):
            same = (schedule.key, schedule.prompt, schedule.first_at, schedule.rule, schedule.timezone)
            if same == (incoming.key, plan.prompt, plan.first_at, plan.rule, plan.timezone):
                return schedule
        return None

    async def _list(self, incoming: Incoming) -> ToolResult:
        now = self._clock()
        person_zone = await self._zone_of(incoming)
        mine = await self.ledger.schedules_of(self._owner(incoming))
        shown = [s for s in mine if self._shown_here(s, incoming)]
        listed: dict[str, Any] = {"schedules": [described(s, now, person_zone) for s in shown]}
        if hidden := len(mine) - len(shown):
            # A schedule's prompt made in a DM is not repeated in a shared channel.
            listed["elsewhere"] = f"{hidden} more made in other places: ask in your DM to see them"
        return ToolResult(content=json.dumps(listed, ensure_ascii=False), structured=listed)

    async def _cancel(self, schedule_id: str, incoming: Incoming) -> ToolResult:
        found = await self.ledger.schedule(schedule_id.strip())
        # Someone else's schedule is "unknown" too: its existence is not theirs to learn.
        if found is None or found.owner != self._owner(incoming) or found.ended:
            return _refused(f"no schedule {schedule_id.strip()!r} of yours is active", "arguments")
        owner = self._owner(incoming)
        if not await self.ledger.set_schedule_status(found.id, "cancelled", by=owner, at=self._clock()):
            return _refused(f"schedule {found.id!r} had already ended", "arguments")
        logger.info("schedule %s cancelled by its person", found.id)
        prompt = found.prompt if self._shown_here(found, incoming) else "(made in another place)"
        cancelled = {"cancelled": found.id, "prompt": prompt}
        return ToolResult(content=json.dumps(cancelled, ensure_ascii=False), structured=cancelled)

    def _owner(self, incoming: Incoming) -> str:
        return person_of(incoming.key, incoming.user_id, self._platforms)

    def _shown_here(self, schedule: Schedule, incoming: Incoming) -> bool:
        """All of a person's schedules where only they read; in a shared place, those made there."""
        if _private(incoming, self._platforms):
            return True
        return (schedule.key.platform, schedule.key.workspace, schedule.key.channel) == (
            incoming.key.platform,
            incoming.key.workspace,
            incoming.key.channel,
        )


# How a scheduled run's turn is told what it is (the offline model looks for it too).
SCHEDULED_RUN = "This message is a scheduled run"


def scheduled_line(schedule_id: str) -> str:
    return (
        f"{SCHEDULED_RUN} of schedule {schedule_id}, which its person set up earlier: do what it says"
        " now (for a reminder, remind them of it); do not schedule it again."
    )


def now_line(now: float, person_zone: str) -> str:
    """ "The current time is 2026-12-07T09:00:00+01:00 (Mon 7 Dec 09:00 CET, …)." in the person's zone."""
    wall = datetime.fromtimestamp(now, timing.zone(person_zone))
    return (
        f"The current time is {wall.isoformat(timespec='seconds')} ({timing.local_text(now, person_zone)},"
        f" the person's time zone {person_zone})."
    )


def described(schedule: Schedule, now: float, person_zone: str) -> dict[str, Any]:
    """A schedule as the model reads it: its next runs in the person's zone, each named."""
    upcoming = timing.upcoming(schedule, now, SHOWN_SLOTS)
    return {
        "id": schedule.id,
        "prompt": schedule.prompt,
        "where": schedule.place,
        "repeat": schedule.rule or "once",
        "status": schedule.status,
        "next_runs": [timing.local_text(slot, person_zone) for slot in upcoming],
        "time_zone": person_zone,
    }


def place_name(incoming: Incoming, platforms: Platforms) -> str:
    """Where a schedule runs, as its person reads it on a card and in a listing."""
    place = incoming.where()
    platform = platforms.get(place.platform)
    title = platform.title if platform is not None else place.platform
    if platform is not None and not platform.channels:
        return f"this chat ({title})"
    if place.dm:
        return f"your DM with nerve ({title})"
    return f"channel {place.channel or incoming.key.channel} ({title})"


def _prompt_problem(arguments: dict[str, Any]) -> str | None:
    prompt = " ".join(str(arguments.get("prompt", "")).split())
    if not prompt:
        return "there is nothing to run: `prompt` is empty"
    if len(prompt) > MAX_PROMPT_CHARS:
        return f"a prompt holds at most {MAX_PROMPT_CHARS} characters"
    return None


def _private(incoming: Incoming, platforms: Platforms) -> bool:
    """Only the person reads the answers here: a DM, or a platform without channels (the terminal)."""
    place = incoming.where()
    platform = platforms.get(place.platform)
    return place.dm or (platform is not None and not platform.channels)


def _refused(detail: str, kind: str) -> ToolResult:
    return ToolResult(content=detail, is_error=True, detail=detail, error_kind=kind)  # type: ignore[arg-type]

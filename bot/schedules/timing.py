"""When a schedule's slots fall: RFC 5545 recurrence rules expanded in the schedule's own time zone.

Pure functions of their arguments (no clock, no I/O): the caller passes `now`, so a test's fake clock
and a process's real one get the same answers.

How wall time becomes instants: the first slot (`first_at`) is read as a wall time in the schedule's
zone, the rule is expanded over wall times (python-dateutil's rrule, with no zone), and each wall
time is then placed in the zone with zoneinfo. So "every day at 09:00" stays at 09:00 across daylight
saving changes, as a person means it. Two wall times need a rule of their own:

- a time that does not exist (the spring-forward gap, 02:30 in Paris on the last Sunday of March)
  runs shifted forward by the gap (at 03:30), as most calendars do; if that instant is also a slot of
  its own, it runs once;
- a time that happens twice (the fall-back hour) runs once, at its first occurrence (fold=0).

The slots are the rule's occurrences at or after `first_at`; `first_at` itself is one only when it
matches the rule (a weekday rule started on a Saturday begins on Monday). A once schedule (rule "")
has exactly one slot: `first_at`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.relativedelta import relativedelta
from dateutil.rrule import rrule, rrulestr

from bot.errors import ScheduleError
from bot.types import Schedule

# Two runs of one schedule are never closer than this (seconds).
MIN_SPACING = 300.0
# How many of a rule's first slots the spacing check looks at.
SPACING_SAMPLE = 50
# A rule's COUNT and INTERVAL at most: beyond these a rule is a mistake, not a plan.
MAX_COUNT = 10_000
MAX_INTERVAL = 10_000
# A rule with no slot this long after its first time never runs (e.g. BYMONTH=2;BYMONTHDAY=30).
HORIZON = timedelta(days=366 * 8)
# The last year a first run may fall in (a far later `at` would overflow the expansion).
LATEST_YEAR = 2999

# The parts RFC 5545 allows in an RRULE (dateutil also knows BYEASTER, which the standard does not).
RULE_PARTS = (
    "FREQ",
    "UNTIL",
    "COUNT",
    "INTERVAL",
    "BYSECOND",
    "BYMINUTE",
    "BYHOUR",
    "BYDAY",
    "BYMONTHDAY",
    "BYYEARDAY",
    "BYWEEKNO",
    "BYMONTH",
    "BYSETPOS",
    "WKST",
)
EXAMPLE = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` ("Europe/Paris"); ScheduleError naming it when there is no such zone."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass  # OSError: a folder of the zone database ("America", "Europe") names no zone
    raise ScheduleError(
        f"{name.strip()!r} is not a time zone: give an IANA name such as Europe/Paris or America/New_York",
        field="timezone",
    )


def parse_at(text: str, timezone: str, *, repeating: bool = False) -> float:
    """An ISO 8601 date-time as UTC epoch seconds: with an offset ("2026-12-08T09:00+01:00", "…Z") as
    written, without one as a wall time in `timezone` (a time in a DST gap shifted forward by it).
    A `repeating` schedule's first time may not fall in a gap: its wall time is the one every later
    run repeats, and the shifted one would move them all by the gap."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(
            f"{text.strip()!r} is not an ISO 8601 date-time: write it like 2026-12-08T09:00", field="at"
        ) from None
    if moment.tzinfo is None:
        wall, moment = moment, moment.replace(tzinfo=zone(timezone))
        shown = datetime.fromtimestamp(moment.timestamp(), moment.tzinfo).replace(tzinfo=None)
        if repeating and shown != wall:
            raise ScheduleError(
                f"{text.strip()!r} does not exist in {timezone.strip()}: the clocks skip it that day."
                " Start the repeating schedule on another day, or at another time",
                field="at",
            )
    # Far enough ahead for anything a person plans; the expansion adds HORIZON past it.
    if moment.year > LATEST_YEAR:
        raise ScheduleError(
            f"{text.strip()!r} is too far ahead: pick a time before {LATEST_YEAR + 1}", field="at"
        )
    return moment.timestamp()


def parse_rule(rule: str) -> str:
    """The recurrence rule `rule` checked and written canonically (upper case, no "RRULE:" prefix),
    "" for once. ScheduleError with what to write instead when it is not an RRULE nerve can run: a
    part RFC 5545 does not define, a DTSTART (the first time is `at`), COUNT with UNTIL, a COUNT or
    INTERVAL out of range, or a value dateutil cannot read."""
    text = rule.strip()
    if text.upper().startswith("RRULE:"):
        text = text[len("RRULE:") :].strip()
    if not text:
        return ""
    if "\n" in text or "\r" in text or "DTSTART" in text.upper():
        raise _rule_error(
            rule, "give one RRULE line only; the first run's time is the `at` argument, not a DTSTART"
        )
    parts: dict[str, str] = {}
    for part in text.rstrip(";").split(";"):
        name, sep, value = part.partition("=")
        name, value = name.strip().upper(), value.strip().upper()
        if not sep or not name or not value:
            raise _rule_error(rule, f"{part.strip()!r} is not NAME=VALUE")
        if name not in RULE_PARTS:
            raise _rule_error(rule, f"{name} is not a part of an RRULE (known: {', '.join(RULE_PARTS)})")
        if name in parts:
            raise _rule_error(rule, f"{name} is given twice")
        parts[name] = value
    if "FREQ" not in parts:
        raise _rule_error(rule, "it needs a FREQ (SECONDLY … YEARLY)")
    if "COUNT" in parts and "UNTIL" in parts:
        raise _rule_error(rule, "give COUNT or UNTIL, not both")
    _check_number(rule, parts, "COUNT", MAX_COUNT)
    _check_number(rule, parts, "INTERVAL", MAX_INTERVAL)
    canonical = ";".join(f"{name}={value}" for name, value in parts.items())
    try:
        _expand(datetime(2026, 1, 1, 9, 0), canonical, ZoneInfo("UTC"))
    except ValueError as error:
        raise _rule_error(rule, str(error)) from None
    return canonical


def _check_number(rule: str, parts: dict[str, str], name: str, most: int) -> None:
    value = parts.get(name)
    if value is not None and not (value.isdigit() and 1 <= int(value) <= most):
        raise _rule_error(rule, f"{name} must be a whole number from 1 to {most}, not {value}")


def _rule_error(rule: str, why: str) -> ScheduleError:
    return ScheduleError(
        f"the recurrence rule {rule.strip()!r} cannot be used: {why}. Write an RFC 5545 RRULE such as"
        f" {EXAMPLE}, or leave it empty for once",
        field="repeat",
    )


def _expand(start: datetime, rule: str, where: ZoneInfo) -> rrule:
    """The rule over naive wall times from `start` (naive, in `where`). An UNTIL in UTC ("…Z") is
    turned into the wall time it is in `where`: dateutil takes an UTC UNTIL only with an aware start."""
    parts = []
    for part in rule.split(";"):
        name, _, value = part.partition("=")
        if name == "UNTIL" and value.endswith("Z"):
            utc = datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            value = utc.astimezone(where).strftime("%Y%m%dT%H%M%S")
        parts.append(f"{name}={value}")
    expanded = rrulestr(";".join(parts), dtstart=start)
    assert isinstance(expanded, rrule)
    return expanded


def _wall(instant: float, where: ZoneInfo) -> datetime:
    """`instant`'s wall time in `where`, naive (what the rule is expanded over)."""
    return datetime.fromtimestamp(instant, where).replace(tzinfo=None)


def _instant(wall: datetime, where: ZoneInfo) -> float:
    """A naive wall time in `where` as an instant: fold=0, so a time in the gap is shifted forward by
    the gap and a time that happens twice is its first occurrence."""
    return wall.replace(tzinfo=where, fold=0).timestamp()


def _slots(first_at: float, rule: str, timezone: str, after: float) -> Iterator[float]:
    """The slots later than `after`, in order, each once."""
    if not rule:
        if first_at > after:
            yield first_at
        return
    where = zone(timezone)
    start = _wall(first_at, where)
    # Wall times a little before `after` may land after it (a gap shifts forward by at most a few hours).
    near = _wall(max(after, first_at), where) - timedelta(days=1)
    later, text = _rebased(start, parse_rule(rule), near)
    last = after
    for wall in _expand(later, text, where):
        instant = _instant(wall, where)
        if instant > last:
            last = instant
            yield instant


# One period of each FREQ, added in wall time as dateutil steps it.
_PERIODS: dict[str, timedelta | relativedelta] = {
    "YEARLY": relativedelta(years=1),
    "MONTHLY": relativedelta(months=1),
    "WEEKLY": timedelta(weeks=1),
    "DAILY": timedelta(days=1),
    "HOURLY": timedelta(hours=1),
    "MINUTELY": timedelta(minutes=1),
    "SECONDLY": timedelta(seconds=1),
}


def _rebased(start: datetime, rule: str, near: datetime) -> tuple[datetime, str]:
    """The rule's start moved forward by whole INTERVALs to at most `near` (so its periods line up as
    before), and the rule with what dateutil would take from the original start written out: both
    expand to the same wall times from the new start on. Without it every expansion walks from the
    first slot: for a schedule every five minutes, a second per year of its age. A rule with COUNT
    counts from its first slot, so it is not moved (its COUNT bounds the walk)."""
    parts = dict(part.split("=", 1) for part in rule.split(";"))
    if "COUNT" in parts or near <= start:
        return start, rule
    freq = parts["FREQ"]
    interval = int(parts.get("INTERVAL", "1"))
    # dateutil takes the day (and month) of a monthly or yearly rule with no BY* day part from its
    # start; a start moved by months may be clipped (31 Jan + 1 month is 28 Feb), so they are written
    # out. Moved by whole weeks, days, hours or minutes, a start keeps its weekday and time of day.
    if not {"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"} & parts.keys():
        if freq == "YEARLY":
            parts.setdefault("BYMONTH", str(start.month))
            parts["BYMONTHDAY"] = str(start.day)
        elif freq == "MONTHLY":
            parts["BYMONTHDAY"] = str(start.day)
    period = _PERIODS[freq]
    if isinstance(period, relativedelta):
        months = (near.year - start.year) * 12 + near.month - start.month
        steps = months // (12 if freq == "YEARLY" else 1) // interval
    else:
        steps = int((near - start) / (period * interval))
    later = start + period * (steps * interval)
    while steps > 0 and later > near:
        steps -= 1
        later = start + period * (steps * interval)
    if steps <= 0:
        return start, rule
    return later, ";".join(f"{name}={value}" for name, value in parts.items())


def slots_between(first_at: float, rule: str, timezone: str, after: float, until: float) -> list[float]:
    """The slots `s` with `after < s <= until`, in order, each once."""
    return list(itertools.takewhile(lambda s: s <= until, _slots(first_at, rule, timezone, after)))


def next_slots(first_at: float, rule: str, timezone: str, after: float, n: int) -> list[float]:
    """The first `n` slots later than `after` (fewer when the rule ends first)."""
    return list(itertools.islice(_slots(first_at, rule, timezone, after), n))


def upcoming(schedule: Schedule, now: float, n: int) -> list[float]:
    """A schedule's next `n` runs as a person is told them: a once schedule's one slot until it has
    run (even when it came due a moment ago and runs late), a recurring one's slots after now and
    after its newest run."""
    if schedule.once:
        return [schedule.first_at] if schedule.last_slot is None else []
    after = max(now, schedule.last_slot or -float("inf"))
    return next_slots(schedule.first_at, schedule.rule, schedule.timezone, after, n)


def check_spacing(first_at: float, rule: str, timezone: str) -> None:
    """ScheduleError unless the rule's first slots (up to `SPACING_SAMPLE` of them) are at least
    `MIN_SPACING` apart, and it has a slot within `HORIZON` of `first_at` at all."""
    if not rule:
        return
    where = zone(timezone)
    start = _wall(first_at, where)
    walls = _expand(start, parse_rule(rule), where)
    # Looked at within the horizon only: a rule that never matches would otherwise be searched to 9999.
    bounded = walls.replace(count=None, until=min(walls._until or start + HORIZON, start + HORIZON))
    sample = [_instant(wall, where) for wall in itertools.islice(bounded, SPACING_SAMPLE)]
    if not sample:
        raise _rule_error(rule, f"it has no run within {HORIZON.days // 366} years of the first time")
    for earlier, later in itertools.pairwise(sample):
        if later - earlier < MIN_SPACING:
            raise ScheduleError(
                f"the recurrence rule {rule.strip()!r} runs {local_text(earlier, timezone)} and again"
                f" {local_text(later, timezone)}: runs of one schedule must be at least"
                f" {MIN_SPACING / 60:g} minutes apart. Use a longer INTERVAL or fewer BYMINUTE values",
                field="repeat",
            )


def due(
    first_at: float, rule: str, timezone: str, last_slot: float | None, now: float, grace: float
) -> tuple[list[float], float | None]:
    """What to do about the slots that came due since `last_slot` (the newest slot claimed or recorded
    missed; None when none was): `(missed, run)`.

    The rule: of the slots after `last_slot` and at or before `now`, only the newest can run, and only
    when it is at most `grace` seconds old; it is `run` (late by `now - run`). Every other one is in
    `missed`, oldest first, to be recorded as missed and never run. So a process back after downtime
    runs at most one slot per schedule, however many passed: never a burst."""
    after = -float("inf") if last_slot is None else last_slot
    passed = slots_between(first_at, rule, timezone, after, now)
    if passed and now - passed[-1] <= grace:
        return passed[:-1], passed[-1]
    return passed, None


def local_text(instant: float, timezone: str) -> str:
    """`instant` as a person in `timezone` reads it on a card: "Mon 7 Dec 09:00 CET" (English names,
    whatever the process's locale)."""
    wall = datetime.fromtimestamp(instant, zone(timezone))
    day = f"{_DAYS[wall.weekday()]} {wall.day} {_MONTHS[wall.month - 1]}"
    return f"{day} {wall:%H:%M} {wall.tzname() or timezone}"

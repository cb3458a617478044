"""Budget days and months in the operator's zone (NERVE_BUDGET_TIMEZONE): when each began, when it
resets. A day is the zone's calendar day (23 or 25 hours across a DST change), not 24 hours."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.budgets.rules import Period


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """One period: counted from `since` (epoch seconds) until `resets` (a moment in the zone)."""

    period: Period
    since: float
    resets: datetime


def window(period: Period, now: float, zone: ZoneInfo) -> Window:
    """The day or month `now` (epoch seconds) falls in, in `zone`."""
    local = datetime.fromtimestamp(now, UTC).astimezone(zone)
    if period == "day":
        start = local.replace(hour=0, minute=0, second=0, microsecond=0)
        following = (start + timedelta(days=1, hours=12)).replace(hour=0)
    else:
        start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        following = (start + timedelta(days=32)).replace(day=1)
    # Re-attach the zone after the arithmetic: wall-clock midnight, whatever the offset is then.
    start = start.replace(tzinfo=zone)
    following = following.replace(tzinfo=zone)
    return Window(period=period, since=start.timestamp(), resets=following)


def day_start(day: str, zone: ZoneInfo) -> float:
    """The start of `day` (YYYY-MM-DD) in `zone`, in epoch seconds; ValueError when it is no date."""
    return datetime.strptime(day.strip(), "%Y-%m-%d").replace(tzinfo=zone).timestamp()


def day_of(moment: float, zone: ZoneInfo) -> str:
    """The calendar day (YYYY-MM-DD) `moment` falls on in `zone`."""
    return datetime.fromtimestamp(moment, UTC).astimezone(zone).strftime("%Y-%m-%d")

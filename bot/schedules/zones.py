"""Which time zone a person's schedules are read and shown in, when they never chose one.

The order (`Agent.time_zone_of`): the zone the person set; the zone their platform reports for them
(`Incoming.time_zone`, from the person's profile, filled by a front end that knows it); on a
platform without channels (the terminal, run on the person's own machine) the machine's zone; UTC.
"""

from __future__ import annotations

import os
from pathlib import Path

from bot.errors import ScheduleError
from bot.schedules.timing import zone

UTC_NAME = "UTC"
_ZONEINFO_DIRS = ("zoneinfo/", "zoneinfo-leaps/", "zoneinfo-posix/")


def checked(name: str | None) -> str | None:
    """`name` when it is an IANA zone this machine knows, else None (a hint is never trusted blindly)."""
    if not name or not name.strip():
        return None
    try:
        zone(name)
    except ScheduleError:
        return None
    return name.strip()


def local_time_zone(localtime: Path = Path("/etc/localtime")) -> str:
    """This machine's IANA zone: `TZ` when it names one, else where /etc/localtime links to (the
    way systemd and the tz database's own tools set it), else UTC. No guess from abbreviations such
    as time.tzname ("CET" names many zones)."""
    if found := checked(os.environ.get("TZ", "").removeprefix(":")):
        return found
    try:
        target = str(localtime.resolve(strict=True))
    except OSError:
        return UTC_NAME
    for marker in _ZONEINFO_DIRS:
        _, found_marker, name = target.rpartition(marker)
        if found_marker and (found := checked(name)):
            return found
    return UTC_NAME

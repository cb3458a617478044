"""When schedules' slots fall: once, daily, weekly, a month's last day, and both daylight saving
changes in Europe/Paris and America/New_York, each slot at its instant and only once; the rules
nerve refuses and why; and what is run or recorded missed after downtime, with a fake `now`.

Expected instants are written in UTC by hand (from the zones' published changes), not computed with
the zone database the code under test uses.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from bot.errors import ScheduleError
from bot.schedules.timing import (
    MIN_SPACING,
    check_spacing,
    due,
    local_text,
    next_slots,
    parse_at,
    parse_rule,
    slots_between,
)

PARIS = "Europe/Paris"
NEW_YORK = "America/New_York"
HOUR = 3600.0
DAY = 24 * HOUR


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def test_a_once_schedule_has_exactly_its_one_slot() -> None:
    at = utc(2026, 12, 8, 8)
    assert next_slots(at, "", PARIS, after=0, n=5) == [at]
    assert slots_between(at, "", PARIS, after=at - DAY, until=at + 365 * DAY) == [at]
    assert slots_between(at, "", PARIS, after=at, until=at + DAY) == []  # after it: nothing more
    assert slots_between(at, "", PARIS, after=0, until=at - 1) == []  # not due yet


def test_daily_at_nine_in_paris_keeps_nine_across_the_spring_change() -> None:
    first = utc(2026, 3, 27, 8)  # Fri 27 Mar 09:00 CET (UTC+1)
    assert next_slots(first, "FREQ=DAILY", PARIS, after=0, n=4) == [
        utc(2026, 3, 27, 8),
        utc(2026, 3, 28, 8),
        utc(2026, 3, 29, 7),  # Sun 29 Mar: CEST (UTC+2) from 02:00
        utc(2026, 3, 30, 7),
    ]


def test_daily_in_the_spring_gap_runs_shifted_by_the_gap_once() -> None:
    first = utc(2026, 3, 28, 1, 30)  # Sat 28 Mar 02:30 CET
    slots = next_slots(first, "FREQ=DAILY", PARIS, after=0, n=3)
    # 02:30 does not exist on 29 Mar (02:00 CET is 03:00 CEST): it runs at 03:30 CEST, 01:30 UTC.
    assert slots == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 30), utc(2026, 3, 30, 0, 30)]
    assert local_text(slots[1], PARIS) == "Sun 29 Mar 03:30 CEST"


def test_daily_in_the_autumn_repeated_hour_runs_once_at_its_first_occurrence() -> None:
    first = utc(2026, 10, 24, 0, 30)  # Sat 24 Oct 02:30 CEST
    slots = next_slots(first, "FREQ=DAILY", PARIS, after=0, n=3)
    # 02:30 happens twice on 25 Oct (03:00 CEST goes back to 02:00 CET): the first, in CEST, only.
    assert slots == [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_hourly_over_the_paris_changes_each_instant_once() -> None:
    spring = slots_between(utc(2026, 3, 28, 23), "FREQ=HOURLY", PARIS, 0, utc(2026, 3, 29, 2))
    # 00:00 CET, 01:00 CET, 02:00 (gap, shifted to 03:00 CEST), 03:00 CEST (the same instant), 04:00.
    assert spring == [utc(2026, 3, 28, 23), utc(2026, 3, 29, 0), utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]
    autumn = slots_between(utc(2026, 10, 24, 22), "FREQ=HOURLY", PARIS, 0, utc(2026, 10, 25, 3))
    # 00:00, 01:00, 02:00 CEST; the second 02:00 (CET) is not another slot; 03:00 CET, 04:00 CET.
    assert autumn == [
        utc(2026, 10, 24, 22),
        utc(2026, 10, 24, 23),
        utc(2026, 10, 25, 0),
        utc(2026, 10, 25, 2),
        utc(2026, 10, 25, 3),
    ]


def test_new_york_spring_change_second_sunday_of_march() -> None:
    first = utc(2026, 3, 7, 7, 30)  # Sat 7 Mar 02:30 EST (UTC-5)
    slots = next_slots(first, "FREQ=DAILY", NEW_YORK, after=0, n=3)
    # Sun 8 Mar: 02:00 EST is 03:00 EDT; 02:30 runs at 03:30 EDT, 07:30 UTC. Then EDT (UTC-4).
    assert slots == [utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30)]
    assert local_text(slots[1], NEW_YORK) == "Sun 8 Mar 03:30 EDT"
    nine = next_slots(utc(2026, 3, 6, 14), "FREQ=DAILY", NEW_YORK, after=0, n=4)
    assert nine == [utc(2026, 3, 6, 14), utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 9, 13)]


def test_new_york_autumn_change_first_sunday_of_november() -> None:
    first = utc(2026, 10, 31, 5, 30)  # Sat 31 Oct 01:30 EDT
    slots = next_slots(first, "FREQ=DAILY", NEW_YORK, after=0, n=3)
    # Sun 1 Nov: 02:00 EDT goes back to 01:00 EST; 01:30 runs once, in EDT. Then EST (UTC-5).
    assert slots == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    assert [local_text(s, NEW_YORK) for s in slots] == [
        "Sat 31 Oct 01:30 EDT",
        "Sun 1 Nov 01:30 EDT",
        "Mon 2 Nov 01:30 EST",
    ]


def test_weekdays_at_nine_skip_the_weekend_and_start_on_the_first_matching_day() -> None:
    first = utc(2026, 12, 5, 8)  # Sat 5 Dec 09:00 CET: not a weekday, so not a slot
    slots = next_slots(first, "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", PARIS, after=0, n=6)
    assert slots == [utc(2026, 12, d, 8) for d in (7, 8, 9, 10, 11, 14)]
    assert local_text(slots[0], PARIS) == "Mon 7 Dec 09:00 CET"


def test_a_months_last_day_including_february_of_a_leap_year() -> None:
    first = utc(2026, 1, 15, 18)
    assert next_slots(first, "FREQ=MONTHLY;BYMONTHDAY=-1", "UTC", after=0, n=4) == [
        utc(2026, 1, 31, 18),
        utc(2026, 2, 28, 18),
        utc(2026, 3, 31, 18),
        utc(2026, 4, 30, 18),
    ]
    leap = next_slots(utc(2028, 1, 15, 18), "FREQ=MONTHLY;BYMONTHDAY=-1", "UTC", after=0, n=2)
    assert leap == [utc(2028, 1, 31, 18), utc(2028, 2, 29, 18)]


def test_count_and_an_until_in_utc_end_the_rule() -> None:
    first = utc(2026, 12, 7, 8)
    assert len(next_slots(first, "FREQ=DAILY;COUNT=3", PARIS, after=0, n=10)) == 3
    until = next_slots(first, "FREQ=DAILY;UNTIL=20261209T080000Z", PARIS, after=0, n=10)
    assert until == [utc(2026, 12, 7, 8), utc(2026, 12, 8, 8), utc(2026, 12, 9, 8)]


def test_slots_between_pages_without_losing_or_repeating_a_slot() -> None:
    first, rule = utc(2026, 10, 20, 22), "FREQ=HOURLY;INTERVAL=1"
    whole = slots_between(first, rule, PARIS, 0, utc(2026, 11, 2))
    paged: list[float] = []
    after = 0.0
    for step in range(1, 40):
        paged += slots_between(first, rule, PARIS, after, first + step * 9 * HOUR)
        after = first + step * 9 * HOUR
    assert paged[: len(whole)] == whole
    assert len(set(paged)) == len(paged)


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("FREQ=DAILY;FOO=1", "FOO is not a part of an RRULE"),
        ("DTSTART:20260101T090000\nRRULE:FREQ=DAILY", "the first run's time is the `at` argument"),
        ("BYDAY=MO", "it needs a FREQ"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be a whole number from 1 to"),
        ("FREQ=DAILY;COUNT=1000000", "COUNT must be a whole number from 1 to"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z", "give COUNT or UNTIL, not both"),
        ("FREQ=DAILY;BYEASTER=0", "BYEASTER is not a part of an RRULE"),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice"),
        ("FREQ=DAILY;BYDAY=XX", "XX"),
        ("FREQ=SOMETIMES", "SOMETIMES"),
        ("every day", "is not NAME=VALUE"),
    ],
)
def test_a_bad_rule_is_refused_saying_what_to_write(rule: str, said: str) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse_rule(rule)
    assert refused.value.field == "repeat"
    assert said in refused.value.message
    assert "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR" in refused.value.message  # what to write instead


def test_a_good_rule_is_written_canonically() -> None:
    assert parse_rule("  rrule:freq=weekly;byday=mo,fr; ") == "FREQ=WEEKLY;BYDAY=MO,FR"
    assert parse_rule("") == parse_rule("  ") == ""


def test_an_unknown_zone_and_a_bad_time_are_refused() -> None:
    with pytest.raises(ScheduleError) as refused:
        next_slots(utc(2026, 12, 7), "FREQ=DAILY", "Mars/Olympus_Mons", after=0, n=1)
    assert refused.value.field == "timezone" and "Europe/Paris" in refused.value.message
    with pytest.raises(ScheduleError) as bad_at:
        parse_at("tomorrow at nine", PARIS)
    assert bad_at.value.field == "at" and "2026-12-08T09:00" in bad_at.value.message


def test_an_iso_time_without_an_offset_is_a_wall_time_in_the_zone() -> None:
    assert parse_at("2026-12-08T09:00", PARIS) == utc(2026, 12, 8, 8)
    assert parse_at("2026-12-08T09:00", NEW_YORK) == utc(2026, 12, 8, 14)
    assert parse_at("2026-12-08T09:00Z", NEW_YORK) == utc(2026, 12, 8, 9)
    assert parse_at("2026-03-29T02:30", PARIS) == utc(2026, 3, 29, 1, 30)  # in the gap: shifted


@pytest.mark.parametrize("rule", ["FREQ=MINUTELY;INTERVAL=1", "FREQ=HOURLY;BYMINUTE=0,2", "FREQ=SECONDLY"])
def test_runs_closer_than_five_minutes_are_refused(rule: str) -> None:
    with pytest.raises(ScheduleError) as refused:
        check_spacing(utc(2026, 12, 7, 8), rule, PARIS)
    assert refused.value.field == "repeat"
    assert f"at least {MIN_SPACING / 60:g} minutes apart" in refused.value.message


def test_five_minutes_apart_and_once_are_allowed() -> None:
    check_spacing(utc(2026, 12, 7, 8), "FREQ=MINUTELY;INTERVAL=5", PARIS)
    check_spacing(utc(2026, 12, 7, 8), "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", PARIS)
    check_spacing(utc(2026, 12, 7, 8), "", PARIS)


def test_a_rule_that_never_comes_is_refused() -> None:
    with pytest.raises(ScheduleError, match="has no run within"):
        check_spacing(utc(2026, 12, 7, 8), "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", PARIS)


DAILY_NINE = (utc(2026, 12, 7, 8), "FREQ=DAILY", PARIS)  # 09:00 CET from Mon 7 Dec


def test_back_within_the_grace_the_newest_slot_runs_late_and_older_ones_are_missed() -> None:
    last = utc(2026, 12, 7, 8)  # Monday's ran; down from Monday until Thursday 09:17
    missed, run = due(*DAILY_NINE, last_slot=last, now=utc(2026, 12, 10, 8, 17), grace=HOUR)
    assert run == utc(2026, 12, 10, 8)
    assert missed == [utc(2026, 12, 8, 8), utc(2026, 12, 9, 8)]


def test_back_beyond_the_grace_nothing_runs_and_every_passed_slot_is_missed() -> None:
    last = utc(2026, 12, 7, 8)
    missed, run = due(*DAILY_NINE, last_slot=last, now=utc(2026, 12, 10, 9, 30), grace=HOUR)
    assert run is None
    assert missed == [utc(2026, 12, 8, 8), utc(2026, 12, 9, 8), utc(2026, 12, 10, 8)]


def test_many_slots_within_the_grace_never_run_as_a_burst() -> None:
    first = utc(2026, 12, 7, 8)
    missed, run = due(first, "FREQ=MINUTELY;INTERVAL=5", PARIS, first, now=first + 20 * 60, grace=HOUR)
    assert run == first + 20 * 60
    assert missed == [first + m * 60 for m in (5, 10, 15)]


def test_due_before_the_first_slot_and_at_the_grace_boundary() -> None:
    first = DAILY_NINE[0]
    assert due(*DAILY_NINE, last_slot=None, now=first - 1, grace=HOUR) == ([], None)
    assert due(*DAILY_NINE, last_slot=None, now=first, grace=HOUR) == ([], first)
    assert due(*DAILY_NINE, last_slot=None, now=first + HOUR, grace=HOUR) == ([], first)
    assert due(*DAILY_NINE, last_slot=None, now=first + HOUR + 1, grace=HOUR) == ([first], None)
    assert due(*DAILY_NINE, last_slot=first, now=first + HOUR, grace=HOUR) == ([], None)


@pytest.mark.parametrize(
    ("first", "rule", "timezone"),
    [
        (utc(2026, 3, 27, 22), "FREQ=HOURLY", PARIS),
        (utc(2026, 3, 27, 1, 30), "FREQ=DAILY", PARIS),
        (utc(2026, 10, 23, 22), "FREQ=HOURLY", PARIS),
        (utc(2026, 3, 6, 6), "FREQ=HOURLY;INTERVAL=1;BYMINUTE=0,30", NEW_YORK),
        (utc(2026, 10, 30, 5, 30), "FREQ=DAILY", NEW_YORK),
    ],
    ids=[
        "paris-spring-hourly",
        "paris-spring-gap-daily",
        "paris-autumn-hourly",
        "ny-spring-half-hourly",
        "ny-autumn-daily",
    ],
)
def test_a_runner_polling_a_fake_clock_runs_every_slot_once_across_a_dst_change(
    first: float, rule: str, timezone: str
) -> None:
    """A poll every minute for four days: each slot is run exactly once, none missed, none doubled."""
    ran: list[float] = []
    last: float | None = None
    for minute in range(4 * 24 * 60):
        missed, run = due(first, rule, timezone, last, now=first + minute * 60, grace=HOUR)
        assert missed == []
        if run is not None:
            ran.append(run)
            last = run
    end = first + (4 * 24 * 60 - 1) * 60
    assert ran == slots_between(first, rule, timezone, 0, end)
    assert len(set(ran)) == len(ran) and ran == sorted(ran)


def walked_from_the_first_slot(
    first_at: float, rule: str, timezone: str, after: float, n: int
) -> list[float]:
    """The plain expansion, every occurrence from the first one: what `next_slots` must equal however
    far from the first slot it starts."""
    where = ZoneInfo(timezone)
    found: list[float] = []
    for wall in rrulestr(rule, dtstart=datetime.fromtimestamp(first_at, where).replace(tzinfo=None)):
        instant = wall.replace(tzinfo=where).timestamp()
        if instant > after and (not found or instant > found[-1]):
            found.append(instant)
            if len(found) == n:
                break
    return found


EQUIVALENCE_RULES = [
    "FREQ=MINUTELY;INTERVAL=317",
    "FREQ=HOURLY;INTERVAL=7",
    "FREQ=HOURLY;INTERVAL=5;BYMINUTE=10,40",
    "FREQ=DAILY;INTERVAL=3;BYHOUR=8,20",
    "FREQ=WEEKLY;INTERVAL=3",
    "FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,MO,SA",
    "FREQ=MONTHLY;INTERVAL=2",
    "FREQ=MONTHLY;BYDAY=-1FR",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=MONTHLY;INTERVAL=5;BYMONTHDAY=1,15,-1",
    "FREQ=YEARLY",
    "FREQ=YEARLY;INTERVAL=2;BYMONTH=3,10;BYDAY=-1SU",
    "FREQ=YEARLY;BYWEEKNO=1;BYDAY=MO",
    "FREQ=YEARLY;BYYEARDAY=100,-1",
    "FREQ=DAILY;UNTIL=20290101T000000",
]
EQUIVALENCE_STARTS = [
    utc(2026, 1, 31, 8, 45),  # the 31st: months without one
    utc(2028, 2, 29, 23, 15),  # a leap day, at night
    utc(2026, 3, 29, 1, 30),  # Paris's spring gap (03:30 CEST)
    utc(2026, 11, 1, 5, 30),  # New York's repeated hour
]


@pytest.mark.parametrize("rule", EQUIVALENCE_RULES)
def test_expanding_far_from_the_first_slot_finds_the_same_slots_as_walking_from_it(rule: str) -> None:
    for first, timezone in itertools.product(EQUIVALENCE_STARTS, (PARIS, NEW_YORK)):
        for offset in (0.0, 1.0, DAY + 7, 37 * DAY + 3 * HOUR, 400 * DAY, 3 * 365 * DAY + 11 * HOUR + 5):
            after = first + offset
            expected = walked_from_the_first_slot(first, rule, timezone, after, 12)
            assert next_slots(first, rule, timezone, after, 12) == expected, (rule, first, timezone, offset)

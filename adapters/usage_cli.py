"""`nerve usage`: who used what, from the usage ledger: per person, place, model or day since a date
(the start of this month by default, in NERVE_BUDGET_TIMEZONE). It reads the store alone."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, replace
from typing import Any, Literal
from zoneinfo import ZoneInfo

from adapters.terminal.safe import say, terminal_json
from bot.budgets.periods import day_of, day_start, window
from bot.config import Settings
from bot.store.choose import open_configured_store
from bot.store.usage import UsageRow

Job = Callable[[Settings], Coroutine[Any, Any, int]]
By = Literal["person", "place", "model", "day"]
BY: tuple[By, ...] = ("person", "place", "model", "day")


def usage_job(by: By, since: str | None, *, as_json: bool, clock: Callable[[], float] = time.time) -> Job:
    """`nerve usage [--by person|place|model|day] [--since YYYY-MM-DD] [--json]`."""

    async def job(settings: Settings) -> int:
        zone = ZoneInfo(settings.nerve_budget_timezone)
        try:
            start = day_start(since, zone) if since else window("month", clock(), zone).since
        except ValueError:
            say(f"nerve: --since takes a date written YYYY-MM-DD, not {since!r}", sys.stderr)
            return 2
        async with await open_configured_store(settings) as store:
            rows = await store.usage_report("hour" if by == "day" else by, start)
        if by == "day":
            rows = _by_day(rows, zone)
        first = day_of(start, zone)
        if as_json:
            document = {"by": by, "since": first, "currency": settings.nerve_currency}
            sys.stdout.write(terminal_json(document | {"rows": [asdict(row) for row in rows]}) + "\n")
            return 0
        if not rows:
            say(f"No model requests since {first}.")
            return 0
        say(f"Model usage by {by} since {first} ({settings.nerve_budget_timezone}):")
        for row in rows:
            say(_line(row, settings.nerve_currency))
        if any(row.estimated for row in rows):
            say("~ some figures are estimates: the model service sent no usage for those requests.")
        return 0

    return job


def _by_day(hours: list[UsageRow], zone: ZoneInfo) -> list[UsageRow]:
    """Hour groups (epoch seconds as text) summed into the zone's calendar days."""
    days: dict[str, UsageRow] = {}
    for row in hours:
        day = day_of(float(row.key), zone)
        seen = days.get(day)
        if seen is None:
            days[day] = replace(row, key=day)
            continue
        cost = None if seen.cost is None and row.cost is None else (seen.cost or 0) + (row.cost or 0)
        days[day] = UsageRow(
            key=day,
            requests=seen.requests + row.requests,
            prompt_tokens=seen.prompt_tokens + row.prompt_tokens,
            cached_tokens=seen.cached_tokens + row.cached_tokens,
            completion_tokens=seen.completion_tokens + row.completion_tokens,
            cost=cost,
            estimated=seen.estimated + row.estimated,
        )
    return [days[day] for day in sorted(days)]


def _line(row: UsageRow, currency: str) -> str:
    key = row.key or "(forgotten person)"
    mark = "~" if row.estimated else " "
    cost = f"  {currency} {row.cost:,.4f}" if row.cost is not None else ""
    return (
        f"{mark} {key}: {row.requests:,} requests, {row.prompt_tokens:,} prompt tokens"
        f" ({row.cached_tokens:,} cached), {row.completion_tokens:,} completion{cost}"
    )

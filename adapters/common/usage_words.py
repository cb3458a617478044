"""`/usage` in words, once for every surface: the person's use today and this month against their
limits, and for an admin the place's and the workspace's. Plain text; each surface escapes it."""

from __future__ import annotations

from bot.types import UsagePeriod, UsageReport

NO_USAGE = "Usage is not recorded here: there is no conversation store."
_WHOSE = {"person": "You", "place": "This place", "workspace": "This workspace"}
_WHEN = {"day": "today", "month": "this month"}


def usage_lines(report: UsageReport | None) -> list[str]:
    """One line per subject and period: `You, today: 1,234 tokens of 200,000 (resets 00:00 UTC on …)`."""
    if report is None:
        return [NO_USAGE]
    lines = []
    for figures in report.figures:
        for period in (figures.day, figures.month):
            lines.append(
                f"{_WHOSE[figures.subject]}, {_WHEN[period.period]}: {_period(period, report.currency)}"
            )
    if report.exempt:
        lines.append("As an admin you are not held to the limits.")
    return lines


def _period(period: UsagePeriod, currency: str) -> str:
    tokens = f"{period.tokens:,} tokens"
    if period.token_limit is not None:
        tokens += f" of {period.token_limit:,}"
    said = [tokens]
    if period.money is not None or period.money_limit is not None:
        money = f"{currency} {period.money or 0:,.2f}"
        if period.money_limit is not None:
            money += f" of {currency} {period.money_limit:,.2f}"
        said.append(money)
    limited = period.token_limit is not None or period.money_limit is not None
    resets = period.resets
    when = f" (resets {resets:%H:%M} {resets.tzname() or ''} on {resets:%a} {resets.day} {resets:%b})"
    return ", ".join(said) + (when.replace(" )", ")").replace("  ", " ") if limited else "")

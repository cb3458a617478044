"""What people are told about budgets: the refusal at a limit and the notice near one, plain and short."""

from __future__ import annotations

from datetime import datetime

from bot.budgets.rules import Limit
from bot.store.usage import Used

_WHOSE = {"person": "You have", "place": "This conversation's place has", "workspace": "This workspace has"}
_PERIOD = {"day": ("daily", "today"), "month": ("monthly", "this month")}


def amount(value: float, money: bool, currency: str) -> str:
    """`12,345 tokens` or `USD 1.23`."""
    return f"{currency} {value:,.2f}" if money else f"{round(value):,} tokens"


def reset_time(moment: datetime) -> str:
    """`00:00 UTC on Tue 8 Dec`: when a period starts afresh, in the budgets' zone."""
    return f"{moment:%H:%M} {moment.tzname() or ''} on {moment:%a} {moment.day} {moment:%b}".replace(
        "  ", " "
    )


def raisers(admins: frozenset[str]) -> str:
    if admins:
        return f"An admin ({', '.join(sorted(admins))}) can raise it."
    return "The operator of nerve can raise it (NERVE_BUDGETS)."


def refusal(limit: Limit, used: Used, resets: datetime, admins: frozenset[str], currency: str) -> str:
    """Why a turn was not sent to the model: which limit, the use, when it resets, who can raise it."""
    money = limit.unit == "money"
    adjective, when = _PERIOD[limit.period]
    return (
        f"⛔ {_WHOSE[limit.kind]} reached the {adjective} limit of {amount(limit.amount, money, currency)}"
        f" ({amount(used.of(money), money, currency)} used {when}), so this message was not sent to the"
        f" model. The limit resets at {reset_time(resets)}. {raisers(admins)}"
    )


def almost_there(limit: Limit, spent: float, resets: datetime, currency: str) -> str:
    """The one short line an answer carries from 80 % of a limit on."""
    money = limit.unit == "money"
    adjective, _ = _PERIOD[limit.period]
    share = min(100, int(100 * spent / limit.amount)) if limit.amount else 100
    whose = _WHOSE[limit.kind].removesuffix(" has").removesuffix(" have")
    return (
        f"ℹ️ {whose} used {share} % of the {adjective} limit of {amount(limit.amount, money, currency)}"
        f" (resets at {reset_time(resets)})."
    )

"""What a person is shown of their usage (`Agent.usage`): each subject's use today and this month,
and its limits; the front ends only render it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

UsageSubject = Literal["person", "place", "workspace"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsagePeriod:
    """One subject's use in one period: tokens, money (None: no price is set), and its limits."""

    period: Literal["day", "month"]
    tokens: int
    money: float | None
    token_limit: int | None
    money_limit: float | None
    resets: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageFigures:
    subject: UsageSubject
    # The person's, place's or workspace's id as budgets name it (`PLATFORM:CHANNEL` for a place).
    id: str
    day: UsagePeriod
    month: UsagePeriod


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport:
    """The person's own figures first; for admins the place's and the workspace's after them."""

    figures: tuple[UsageFigures, ...]
    # Admins are not held to the limits (unless the budgets say otherwise).
    exempt: bool
    currency: str
    zone: str

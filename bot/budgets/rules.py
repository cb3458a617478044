"""The operator's prices (NERVE_PRICES) and budgets (NERVE_BUDGETS), read once from their JSON.

Pydantic at the edge: a mistyped limit fails at start-up naming the field, never mid-turn. Inside,
frozen values: `Prices.cost(model, usage)` and `Budgets.limits_for(subject kind, id)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from bot.types import Usage

Kind = Literal["person", "place", "workspace"]
Period = Literal["day", "month"]
Unit = Literal["tokens", "money"]
KINDS: tuple[Kind, ...] = ("person", "place", "workspace")
PERIODS: tuple[Period, ...] = ("day", "month")
MILLION = 1_000_000


class _Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)
    # Cached prompt tokens; without a price of their own, they cost what the prompt does.
    cached: float | None = Field(default=None, ge=0)


class _Amounts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int | None = Field(default=None, ge=0)
    money: float | None = Field(default=None, ge=0)


class _Periods(BaseModel):
    model_config = ConfigDict(extra="forbid")
    day: _Amounts | None = None
    month: _Amounts | None = None


class _Overrides(BaseModel):
    model_config = ConfigDict(extra="forbid")
    person: dict[str, _Periods] = {}
    place: dict[str, _Periods] = {}
    workspace: dict[str, _Periods] = {}


class _Budgets(BaseModel):
    model_config = ConfigDict(extra="forbid")
    person: _Periods | None = None
    place: _Periods | None = None
    workspace: _Periods | None = None
    overrides: _Overrides = _Overrides()
    admins_exempt: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """Money per million tokens of each kind."""

    prompt: float
    completion: float
    cached: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    by_model: dict[str, Price] = field(default_factory=dict)

    def cost(self, model: str, usage: Usage) -> float | None:
        """What `usage` cost on `model`, or None when no price is set for it."""
        price = self.by_model.get(model)
        if price is None:
            return None
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        fresh = usage.prompt_tokens - cached
        return (fresh * price.prompt + cached * price.cached + usage.completion_tokens * price.completion) / (
            MILLION
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit:
    """One cap: `amount` tokens or money a person, place or workspace may use per day or month."""

    kind: Kind
    period: Period
    unit: Unit
    amount: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    defaults: dict[tuple[Kind, Period, Unit], float] = field(default_factory=dict)
    overrides: dict[tuple[Kind, str], dict[tuple[Period, Unit], float]] = field(default_factory=dict)
    admins_exempt: bool = True

    @property
    def any(self) -> bool:
        return bool(self.defaults or self.overrides)

    @property
    def in_money(self) -> bool:
        units = [unit for (_, _, unit) in self.defaults]
        units += [unit for amounts in self.overrides.values() for (_, unit) in amounts]
        return "money" in units

    def limits_for(self, kind: Kind, ids: tuple[str, ...]) -> list[Limit]:
        """The limits on a subject: its override by any of its `ids`, else the default."""
        found: dict[tuple[Period, Unit], float] = {
            (period, unit): amount for (k, period, unit), amount in self.defaults.items() if k == kind
        }
        for subject_id in ids:
            if (kind, subject_id) in self.overrides:
                found.update(self.overrides[(kind, subject_id)])
                break
        return [
            Limit(kind=kind, period=period, unit=unit, amount=amount)
            for (period, unit), amount in sorted(found.items())
        ]


def parse_prices(text: str) -> Prices:
    """NERVE_PRICES: `{"MODEL": {"prompt": 0.15, "cached": 0.075, "completion": 0.6}}` per million tokens."""
    if not text.strip():
        return Prices()
    try:
        read = _read_prices(text)
    except ValidationError as exc:
        raise ValueError(f"NERVE_PRICES: {_first_error(exc)}") from None
    return Prices(
        by_model={
            name: Price(
                prompt=p.prompt, completion=p.completion, cached=p.prompt if p.cached is None else p.cached
            )
            for name, p in read.items()
        }
    )


def _read_prices(text: str) -> dict[str, _Price]:
    return TypeAdapter(dict[str, _Price]).validate_json(text)


def parse_budgets(text: str) -> Budgets:
    """NERVE_BUDGETS: defaults per kind and period, overrides by id (see docs/settings.md)."""
    if not text.strip():
        return Budgets()
    try:
        read = _Budgets.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"NERVE_BUDGETS: {_first_error(exc)}") from None
    defaults: dict[tuple[Kind, Period, Unit], float] = {}
    for kind in KINDS:
        for (period, unit), amount in _amounts(getattr(read, kind)).items():
            defaults[(kind, period, unit)] = amount
    overrides = {
        (kind, subject_id): _amounts(periods)
        for kind in KINDS
        for subject_id, periods in getattr(read.overrides, kind).items()
    }
    return Budgets(defaults=defaults, overrides=overrides, admins_exempt=read.admins_exempt)


def _amounts(periods: _Periods | None) -> dict[tuple[Period, Unit], float]:
    out: dict[tuple[Period, Unit], float] = {}
    for period in PERIODS:
        amounts = getattr(periods, period) if periods is not None else None
        if amounts is None:
            continue
        if amounts.tokens is not None:
            out[(period, "tokens")] = float(amounts.tokens)
        if amounts.money is not None:
            out[(period, "money")] = amounts.money
    return out


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "the document"
    return f"{where}: {error['msg']}"

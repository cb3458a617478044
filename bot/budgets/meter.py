"""The meter on every model request: check the budgets and reserve before, settle after.

A turn's first request is checked against every limit on its person, place and workspace (admins
exempt unless the budgets say otherwise); later requests of the same turn only reserve, so a running
turn finishes its work and concurrency overspends by at most the turns already running.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.budgets.periods import window
from bot.budgets.rules import Budgets, Kind, Limit, Prices
from bot.budgets.words import almost_there, refusal
from bot.errors import StreamCut
from bot.model.tokens import estimate_message_tokens, estimate_tokens, estimate_tools_tokens
from bot.observe import metrics
from bot.policy.platforms import Platforms
from bot.policy.scopes import place_id
from bot.store.usage import Check, Refused, UsageEntry, UsageLedger
from bot.types import (
    ChatMessage,
    Completion,
    Incoming,
    Person,
    ToolSpec,
    Usage,
    UsageFigures,
    UsagePeriod,
    UsageReport,
)

# The share of a limit from which an answer carries a short notice.
NOTICE_SHARE = 0.8


class AgentConfigLike(Protocol):
    """What the meter reads of `AgentConfig` (which lives beside the loop that imports this module)."""

    @property
    def platforms(self) -> Platforms: ...
    @property
    def admins(self) -> frozenset[str]: ...
    @property
    def prices(self) -> Prices: ...
    @property
    def budgets(self) -> Budgets: ...
    @property
    def budget_zone(self) -> str: ...
    @property
    def currency(self) -> str: ...
    @property
    def model(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    """A person, place or workspace a request counts for: its stored id and the ids an override may use."""

    kind: Kind
    id: str
    ids: tuple[str, ...]


@dataclass(eq=False, kw_only=True)
class UsageMeter:
    store: UsageLedger
    platforms: Platforms
    # The configured model's name, until its answer says which model answered.
    model: str = ""
    admins: frozenset[str] = frozenset()
    prices: Prices = field(default_factory=Prices)
    budgets: Budgets = field(default_factory=Budgets)
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    currency: str = "USD"
    clock: Callable[[], float] = time.time

    def subjects(self, incoming: Incoming) -> tuple[Subject, Subject, Subject]:
        key = incoming.key
        person = Person.of(key, incoming.user_id, self.platforms)
        place = place_id(incoming.where())
        workspace = f"{key.platform}:{key.workspace}"
        return (
            Subject(kind="person", id=person.id, ids=(person.id, incoming.user_id)),
            Subject(kind="place", id=place, ids=(place, key.channel)),
            Subject(kind="workspace", id=workspace, ids=(workspace, key.workspace)),
        )

    def exempt(self, incoming: Incoming) -> bool:
        return self.budgets.admins_exempt and incoming.user_id in self.admins

    async def open(self, incoming: Incoming, model: str, estimate: Usage, *, check: bool) -> Charge | str:
        """Reserve `estimate` for one request; with `check`, the refusal's text when a limit is reached."""
        subjects = self.subjects(incoming)
        now = self.clock()
        limits: list[tuple[Limit, Check]] = []
        if check and self.budgets.any and not self.exempt(incoming):
            for subject in subjects:
                for limit in self.budgets.limits_for(subject.kind, subject.ids):
                    since = window(limit.period, now, self.zone).since
                    money = limit.unit == "money"
                    limits.append(
                        (
                            limit,
                            Check(
                                column=subject.kind,
                                subject=subject.id,
                                since=since,
                                money=money,
                                amount=limit.amount,
                            ),
                        )
                    )
        person, place, workspace = subjects
        entry = UsageEntry(
            turn=incoming.event_id,
            conversation=str(incoming.key),
            person=person.id,
            place=place.id,
            workspace=workspace.id,
            platform=incoming.key.platform,
            model=model,
        )
        if not limits:
            # Nothing to hold this request to: recorded once, when its answer is in.
            return Charge(meter=self, row_id=None, entry=entry, at=now, model=model, estimate=estimate)
        checks = [c for _, c in limits]
        result = await self.store.reserve_usage(
            entry, estimate, self.prices.cost(model, estimate), checks, at=now
        )
        if isinstance(result, Refused):
            limit = next(limit for limit, c in limits if c is result.check)
            resets = window(limit.period, now, self.zone).resets
            metrics.turn_outcome("refused_budget")
            return refusal(limit, result.used, resets, self.admins, self.currency)
        notice = None
        for (limit, c), used in zip(limits, result.used, strict=True):
            spent = used.of(c.money)
            if spent >= NOTICE_SHARE * limit.amount and notice is None:
                notice = almost_there(
                    limit, spent, window(limit.period, now, self.zone).resets, self.currency
                )
        return Charge(
            meter=self, row_id=result.id, entry=entry, at=now, model=model, estimate=estimate, notice=notice
        )

    async def settle(self, charge: Charge, model: str, usage: Usage) -> None:
        cost = self.prices.cost(model, usage)
        if charge.row_id is not None:
            await self.store.settle_usage(charge.row_id, model, usage, cost)
        elif usage.total_tokens:
            await self.store.record_usage(replace(charge.entry, model=model), usage, cost, at=charge.at)
        metrics.model_usage(model, usage, cost)

    async def report(self, incoming: Incoming) -> UsageReport:
        """The person's use today and this month, and limits; for an admin the place's and workspace's too."""
        admin = incoming.user_id in self.admins
        now = self.clock()
        day, month = window("day", now, self.zone), window("month", now, self.zone)
        figures = []
        for subject in self.subjects(incoming):
            if subject.kind != "person" and not admin:
                continue
            limits = self.budgets.limits_for(subject.kind, subject.ids)
            periods = []
            for span in (day, month):
                used = await self.store.usage_of(subject.kind, subject.id, span.since)
                amounts = {limit.unit: limit.amount for limit in limits if limit.period == span.period}
                periods.append(
                    UsagePeriod(
                        period=span.period,
                        tokens=used.tokens,
                        money=used.money if self.prices.by_model else None,
                        token_limit=int(amounts["tokens"]) if "tokens" in amounts else None,
                        money_limit=amounts.get("money"),
                        resets=span.resets,
                    )
                )
            figures.append(
                UsageFigures(subject=subject.kind, id=subject.id, day=periods[0], month=periods[1])
            )
        return UsageReport(
            figures=tuple(figures), exempt=self.exempt(incoming), currency=self.currency, zone=str(self.zone)
        )


@dataclass(eq=False, kw_only=True)
class Charge:
    """One request's reservation; settled with its answer's usage, or with none when it failed."""

    meter: UsageMeter
    # The reservation to settle; None when nothing was reserved (the row is written when settled).
    row_id: str | None
    entry: UsageEntry
    at: float
    model: str
    estimate: Usage
    notice: str | None = None
    settled: bool = False

    async def settle(self, completion: Completion, estimated: Usage) -> Usage:
        """Settle with the provider's figures, or `estimated` (marked) when it sent none."""
        usage = completion.usage or Usage(
            prompt_tokens=estimated.prompt_tokens,
            completion_tokens=estimated.completion_tokens,
            estimated=True,
        )
        self.settled = True
        await self.meter.settle(self, completion.model or self.model, usage)
        return usage

    async def __aenter__(self) -> Charge:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.settled or exc is None or not isinstance(exc, Exception):
            return  # a cancelled turn keeps its reservation: nobody knows what the provider counted
        self.settled = True
        if isinstance(exc, StreamCut):
            # The provider wrote part of an answer: the prompt and what was shown, estimated.
            used = replace(self.estimate, completion_tokens=estimate_tokens(exc.partial), estimated=True)
        else:
            used = Usage()  # a request that failed used nothing we know of: its reservation is released
        await self.meter.settle(self, self.model, used)


async def open_request(
    meter: UsageMeter | None,
    incoming: Incoming,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    check: bool,
) -> Charge | str | None:
    """One model request's reservation (the budgets checked with `check`, a turn's first request), the
    refusal's text, or None without a meter. The estimate is the request as it will be sent."""
    if meter is None:
        return None
    estimate = Usage(prompt_tokens=estimate_message_tokens(messages) + estimate_tools_tokens(tools))
    return await meter.open(incoming, meter.model, estimate, check=check)


async def settle_request(charge: Charge | None, completion: Completion, model: str) -> None:
    """Settle a request with its answer (estimated when the provider sent no usage); only counted
    in the metrics without a meter."""
    if charge is not None:
        answer = completion.message
        written = estimate_message_tokens([answer]) if answer.content or answer.tool_calls else 0
        await charge.settle(completion, replace(charge.estimate, completion_tokens=written))
    elif completion.usage is not None:
        metrics.model_usage(model, completion.usage, None)


def usage_meter(store: object, config: AgentConfigLike, clock: Callable[[], float]) -> UsageMeter | None:
    """The meter over `store`'s usage ledger, as the config sets it; None for a store without one."""
    if not isinstance(store, UsageLedger):
        return None
    return UsageMeter(
        store=store,
        platforms=config.platforms,
        model=config.model,
        admins=config.admins,
        prices=config.prices,
        budgets=config.budgets,
        zone=ZoneInfo(config.budget_zone),
        currency=config.currency,
        clock=clock,
    )

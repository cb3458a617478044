"""The usage ledger: one row per model request, and the budget check that reserves it.

`reserve_usage` sums what each checked subject used in its period and inserts the request's
reservation in ONE write transaction (writes are serialized on both stores: `BEGIN IMMEDIATE` on
SQLite, an advisory lock on PostgreSQL), so two turns racing at a limit cannot both see room that
only one has: a later turn sees the earlier one's reservation. `settle_usage` then puts the
provider's figures in its place.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bot.store.dialect import Connection, Ledger
from bot.types import Usage

Column = Literal["person", "place", "workspace"]
Grouping = Literal["person", "place", "model", "hour"]
_TOKENS = "COALESCE(SUM(prompt_tokens + completion_tokens), 0), COALESCE(SUM(cost), 0)"


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageEntry:
    """Who and where one model request is counted for."""

    turn: str | None
    conversation: str
    person: str
    place: str
    workspace: str
    platform: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One limit to hold the request to: what `column` = `subject` used since `since` (epoch)."""

    column: Column
    subject: str
    since: float
    money: bool
    amount: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Used:
    """Tokens and money used (reservations included)."""

    tokens: int = 0
    money: float = 0.0

    def of(self, money: bool) -> float:
        return self.money if money else float(self.tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """Reserved: the row to settle, and what each check's subject had used before it."""

    id: str
    used: tuple[Used, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """Not reserved: the first check already at or past its amount, and what it had used."""

    check: Check
    used: Used


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    """A group of the report: its key (a person, place, model or UTC hour) and its figures."""

    key: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cost: float | None
    estimated: int


class UsageLedger(Ledger):
    async def reserve_usage(
        self,
        entry: UsageEntry,
        estimate: Usage,
        cost: float | None,
        checks: Sequence[Check],
        *,
        at: float,
    ) -> Reservation | Refused:
        """Check every limit and, when none is reached, reserve `estimate`: one transaction."""

        async def reserve(db: Connection) -> Reservation | Refused:
            # Every check's sum in one statement: each is a round trip to the database otherwise, on
            # the path of every turn's first request.
            used = await _used_all(db, checks)
            for check, found in zip(checks, used, strict=True):
                if found.of(check.money) >= check.amount:
                    return Refused(check=check, used=found)
            row_id = await _insert(db, entry, estimate, cost, settled=False, at=at)
            return Reservation(id=row_id, used=used)

        return await self._transaction(reserve)

    async def record_usage(self, entry: UsageEntry, usage: Usage, cost: float | None, *, at: float) -> None:
        """Record a request that nothing was reserved for (no limit to hold it to), settled at once."""
        async with self._write_one() as db:
            await _insert(db, entry, usage, cost, settled=True, at=at)

    async def settle_usage(self, row_id: str, model: str, usage: Usage, cost: float | None) -> None:
        """Replace a reservation with what the request really used."""
        async with self._write_one() as db:
            await db.execute(
                "UPDATE model_usage SET model = ?, prompt_tokens = ?, cached_tokens = ?,"
                " completion_tokens = ?, cost = ?, estimated = ?, settled = 1 WHERE id = ?",
                (
                    model,
                    usage.prompt_tokens,
                    usage.cached_tokens,
                    usage.completion_tokens,
                    cost,
                    int(usage.estimated),
                    row_id,
                ),
            )

    async def usage_of(self, column: Column, subject: str, since: float) -> Used:
        """What `column` = `subject` used since `since` (epoch seconds), reservations included."""
        async with self._read() as db:
            return await _used(db, column, subject, since)

    async def usage_report(self, by: Grouping, since: float) -> list[UsageRow]:
        """Every request since `since`, grouped `by` a column (or the UTC hour, epoch seconds as text)."""
        key = "CAST(CAST(at / 3600 AS INTEGER) * 3600 AS TEXT)" if by == "hour" else f"COALESCE({by}, '')"
        if by == "hour" and self._sql.name == "postgres":
            key = "CAST(FLOOR(at / 3600) * 3600 AS BIGINT)::TEXT"
        rows = await self._rows(
            f"SELECT {key} AS k, COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(cached_tokens), 0),"
            " COALESCE(SUM(completion_tokens), 0), SUM(cost), COALESCE(SUM(estimated), 0)"
            f" FROM model_usage WHERE at >= ? GROUP BY k ORDER BY k",
            (since,),
        )
        return [
            UsageRow(
                key=str(row[0]),
                requests=int(row[1]),
                prompt_tokens=int(row[2]),
                cached_tokens=int(row[3]),
                completion_tokens=int(row[4]),
                cost=None if row[5] is None else float(row[5]),
                estimated=int(row[6]),
            )
            for row in rows
        ]


async def _insert(
    db: Connection, entry: UsageEntry, usage: Usage, cost: float | None, *, settled: bool, at: float
) -> str:
    row_id = "u" + secrets.token_hex(8)
    await db.execute(
        "INSERT INTO model_usage (id, turn, conversation, person, place, workspace, platform, model,"
        " prompt_tokens, cached_tokens, completion_tokens, cost, estimated, settled, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row_id,
            entry.turn,
            entry.conversation,
            entry.person,
            entry.place,
            entry.workspace,
            entry.platform,
            entry.model,
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens,
            cost,
            # A reservation is an estimate until settled.
            int(usage.estimated or not settled),
            int(settled),
            at,
        ),
    )
    return row_id


async def _used_all(db: Connection, checks: Sequence[Check]) -> tuple[Used, ...]:
    """What each check's subject used in its period, in the checks' order, read in one statement."""
    if not checks:
        return ()
    # Each branch is the same indexed sum `_used` reads; the first column puts the rows in order.
    branches = " UNION ALL ".join(
        f"SELECT {n}, {_TOKENS} FROM model_usage WHERE {check.column} = ? AND at >= ?"
        for n, check in enumerate(checks)
    )
    params = [value for check in checks for value in (check.subject, check.since)]
    rows = await db.execute_fetchall(branches, params)
    found = {int(n): Used(tokens=int(tokens), money=float(money)) for n, tokens, money in rows}
    return tuple(found.get(n, Used()) for n in range(len(checks)))


async def _used(db: Connection, column: Column, subject: str, since: float) -> Used:
    rows = await db.execute_fetchall(
        f"SELECT {_TOKENS} FROM model_usage WHERE {column} = ? AND at >= ?", (subject, since)
    )
    tokens, money = rows[0] if rows else (0, 0.0)
    return Used(tokens=int(tokens), money=float(money))

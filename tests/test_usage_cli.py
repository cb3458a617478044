"""`nerve usage` through the real command line, on SQLite and on PostgreSQL: the ledger summed by
person, place, model and day (days in NERVE_BUDGET_TIMEZONE), as text and JSON, estimates marked."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.store.usage import Reservation, UsageEntry
from bot.types import Usage
from tests.stores import Backend
from tests.test_cli import run_nerve
from tests.test_memory_cli import env_for

pytestmark = pytest.mark.both_stores


def at(day: int, hour: int) -> float:
    return datetime(2026, 11, day, hour, 30, tzinfo=UTC).timestamp()


async def spend(store, person: str, model: str, when: float, figures: Usage, cost: float | None) -> None:
    entry = UsageEntry(
        turn=None,
        conversation="slack:T1:CGEN:t",
        person=person,
        place="slack:CGEN",
        workspace="slack:T1",
        platform="slack",
        model=model,
    )
    reserved = await store.reserve_usage(entry, Usage(prompt_tokens=10), None, [], at=when)
    assert isinstance(reserved, Reservation)
    await store.settle_usage(reserved.id, model, figures, cost)


async def test_usage_sums_by_person_model_and_day_in_the_zone(tmp_path: Path, store_backend: Backend) -> None:
    async with await store_backend.open() as store:
        await spend(
            store,
            "slack:T1:UALICE",
            "big",
            at(2, 10),
            Usage(prompt_tokens=100, completion_tokens=10, cached_tokens=60),
            0.5,
        )
        # 23:30 UTC on the 2nd is the 3rd in Paris.
        await spend(
            store,
            "slack:T1:UBOB",
            "small",
            at(2, 23),
            Usage(prompt_tokens=7, completion_tokens=3, estimated=True),
            None,
        )
        await spend(
            store, "slack:T1:UALICE", "big", at(1, 5), Usage(prompt_tokens=1000, completion_tokens=1000), 2.0
        )
    env = env_for(tmp_path, store_backend) | {"NERVE_BUDGET_TIMEZONE": "Europe/Paris"}

    code, out, err = await run_nerve("usage", "--since", "2026-11-02", "--json", env=env)
    assert code == 0, err
    document = json.loads(out)
    assert (document["by"], document["since"]) == ("person", "2026-11-02")
    assert [
        (r["key"], r["prompt_tokens"], r["cached_tokens"], r["completion_tokens"], r["cost"])
        for r in document["rows"]
    ] == [
        ("slack:T1:UALICE", 100, 60, 10, 0.5),
        ("slack:T1:UBOB", 7, 0, 3, None),
    ]

    code, out, err = await run_nerve("usage", "--by", "day", "--since", "2026-11-01", "--json", env=env)
    assert code == 0, err
    assert [(r["key"], r["requests"]) for r in json.loads(out)["rows"]] == [
        ("2026-11-01", 1),
        ("2026-11-02", 1),
        ("2026-11-03", 1),
    ]

    code, out, err = await run_nerve("usage", "--by", "model", "--since", "2026-11-01", env=env)
    assert code == 0, err
    assert "  big: 2 requests, 1,100 prompt tokens (60 cached), 1,010 completion  USD 2.5000" in out
    assert "~ small: 1 requests" in out and "some figures are estimates" in out

    code, out, err = await run_nerve("usage", "--since", "yesterday", env=env)
    assert code == 2 and "YYYY-MM-DD" in err

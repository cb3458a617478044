"""What the store does on every turn's and every model request's path, and what it costs.

The budget check sums each limit's subject over its period; those sums are read together, and a
request's settlement (or its record, when no limit holds it) is a single statement; a user's message
writes its conversation's privacy only while it is unknown. Each statement is a hand-off to the
database, and with one connection per store, turns running at once queue for every one of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.store.dialect import Connection
from bot.store.sqlite import SQLiteStore
from bot.store.usage import Check, Refused, Reservation, UsageEntry, Used
from bot.types import Author, ChatMessage, ConversationKey, Usage

# Monday 7 December 2026, 10:00 UTC.
MONDAY = datetime(2026, 12, 7, 10, 0, tzinfo=UTC).timestamp()
HOUR, DAY = 3600.0, 86400.0


def entry(person: str, place: str = "slack:C", workspace: str = "slack:T") -> UsageEntry:
    return UsageEntry(
        turn=None,
        conversation="c",
        person=person,
        place=place,
        workspace=workspace,
        platform="slack",
        model="m",
    )


def tokens(prompt: int, completion: int = 0) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def check(column: str, subject: str, since: float, amount: float, *, money: bool = False) -> Check:
    return Check(column=column, subject=subject, since=since, money=money, amount=amount)  # type: ignore[arg-type]


async def primed(store) -> None:
    """Alice: 50 tokens today (0.5) and 30 last week (0.25); Bob: 100 today in the same place (0.2)."""
    await store.record_usage(entry("alice"), tokens(40, 10), 0.5, at=MONDAY)
    await store.record_usage(entry("alice"), tokens(30), 0.25, at=MONDAY - 7 * DAY)
    await store.record_usage(entry("bob"), tokens(100), 0.2, at=MONDAY - HOUR)


@pytest.mark.both_stores
async def test_a_reservation_reads_each_limits_use_in_order_and_refuses_at_the_first_one_reached(
    store,
) -> None:
    await primed(store)
    checks = [
        check("person", "alice", MONDAY - 2 * HOUR, 1000),
        check("person", "alice", MONDAY - 30 * DAY, 10, money=True),
        check("place", "slack:C", MONDAY - 2 * HOUR, 1000),
        check("workspace", "slack:T", MONDAY - 30 * DAY, 10, money=True),
        check("person", "carol", MONDAY - 30 * DAY, 10),
    ]
    granted = await store.reserve_usage(entry("alice"), tokens(5), 0.01, checks, at=MONDAY)
    assert isinstance(granted, Reservation)
    assert [u.tokens for u in granted.used] == [50, 80, 150, 180, 0]
    assert [u.money for u in granted.used] == pytest.approx([0.5, 0.75, 0.7, 0.95, 0.0])

    # The place (now 155 with the reservation) and the workspace are both at their amounts: the
    # refusal names the place, the first of the two in the order the limits were given.
    at_limits = [
        check("person", "alice", MONDAY - 2 * HOUR, 1000),
        check("place", "slack:C", MONDAY - 2 * HOUR, 155),
        check("workspace", "slack:T", MONDAY - 30 * DAY, 0.5, money=True),
    ]
    refused = await store.reserve_usage(entry("alice"), tokens(5), 0.01, at_limits, at=MONDAY)
    assert isinstance(refused, Refused)
    assert refused.check is at_limits[1]
    assert refused.used.tokens == 155
    assert refused.used.money == pytest.approx(0.71)
    # Refused: nothing was reserved for it.
    assert await store.usage_of("place", "slack:C", MONDAY - 2 * HOUR) == Used(
        tokens=155, money=pytest.approx(0.71)
    )


async def test_a_request_costs_the_store_one_read_and_one_write_for_its_limits_and_one_to_settle(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        await primed(store)
        statements: list[str] = []
        await store._db.set_trace_callback(statements.append)
        checks = [
            check("person", "alice", MONDAY - 2 * HOUR, 1000),
            check("person", "alice", MONDAY - 30 * DAY, 10, money=True),
            check("place", "slack:C", MONDAY - 2 * HOUR, 1000),
            check("workspace", "slack:T", MONDAY - 30 * DAY, 10, money=True),
        ]
        granted = await store.reserve_usage(entry("alice"), tokens(5), 0.01, checks, at=MONDAY)
        assert isinstance(granted, Reservation)
        reserved = list(statements)
        # The check and the reservation stay one transaction: BEGIN, the four sums, the row, COMMIT.
        assert [s.split()[0] for s in reserved] == ["BEGIN", "SELECT", "INSERT", "COMMIT"]

        statements.clear()
        await store.settle_usage(granted.id, "m", tokens(7, 3), 0.02)
        await store.record_usage(entry("alice"), tokens(9), None, at=MONDAY)
        assert [s.split()[0] for s in statements] == ["UPDATE", "INSERT"]
        await store._db.set_trace_callback(None)
        assert await store.usage_of("person", "alice", MONDAY - 2 * HOUR) == Used(
            tokens=69, money=pytest.approx(0.52)
        )
    finally:
        await store.close()


async def test_a_users_message_writes_its_conversations_privacy_only_while_it_is_unknown(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        dm = ConversationKey(platform="slack", workspace="T1", channel="D1", thread="t1")
        alice = Author(person="slack:T1:UA", user_id="UA", private=True)
        statements: list[str] = []
        await store._db.set_trace_callback(statements.append)
        await store.append(dm, [ChatMessage(role="user", content="hi")], event_id="e1", author=alice)
        await store.append(dm, [ChatMessage(role="assistant", content="hello")])
        await store.append(dm, [ChatMessage(role="user", content="again")], event_id="e2", author=alice)
        await store._db.set_trace_callback(None)
        # Started private, and not written again by the later message.
        assert not [s for s in statements if s.startswith("UPDATE conversations")]
        assert await store._rows("SELECT private FROM conversations") == [(1,)]

        # A conversation started without an author (a shared file's, say) learns it from the first message.
        channel = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="t2")
        await store.append(channel, [ChatMessage(role="assistant", content="a file")])
        bob = Author(person="slack:T1:UB", user_id="UB", private=False)
        await store.append(channel, [ChatMessage(role="user", content="hi")], event_id="e3", author=bob)
        rows = await store._rows("SELECT thread, private FROM conversations ORDER BY id")
        assert [tuple(r) for r in rows] == [("t1", 1), ("t2", 0)]
        assert [m.content for m in await store.history(dm)] == ["hi", "hello", "again"]
    finally:
        await store.close()


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        yield store
    finally:
        await store.close()


async def test_the_limits_sums_read_their_index_alone_not_every_row_of_the_period(
    sqlite: SQLiteStore,
) -> None:
    """A busy workspace's month is tens of thousands of rows, summed on each turn's first request."""
    store = sqlite
    await primed(store)
    statements: list[str] = []
    await store._db.set_trace_callback(statements.append)
    checks = [
        check("person", "alice", MONDAY - 30 * DAY, 1000),
        check("place", "slack:C", MONDAY - 30 * DAY, 1000),
        check("workspace", "slack:T", MONDAY - 30 * DAY, 1000),
    ]
    assert isinstance(
        await store.reserve_usage(entry("alice"), tokens(5), 0.01, checks, at=MONDAY), Reservation
    )
    await store._db.set_trace_callback(None)
    (sums,) = [s for s in statements if s.startswith("SELECT")]
    plan = [str(row[3]) for row in await store._rows(f"EXPLAIN QUERY PLAN {sums}")]
    searches = [step for step in plan if step.startswith(("SEARCH", "SCAN"))]
    assert len(searches) == 3
    assert all("USING COVERING INDEX model_usage_by_" in step for step in searches), plan


async def test_a_read_does_not_wait_for_a_write_in_progress_and_sees_only_what_was_committed(
    sqlite: SQLiteStore,
) -> None:
    """A hundred turns at once each read their history while the others write: no queue behind them."""
    store = sqlite
    key = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="t1")
    await store.append(key, [ChatMessage(role="user", content="committed")], event_id="e1")
    writing, done = asyncio.Event(), asyncio.Event()

    async def slow_write() -> None:
        async with store._write() as db:
            await store._insert_messages(db, key, [ChatMessage(role="assistant", content="in progress")])
            writing.set()
            await done.wait()

    writer = asyncio.create_task(slow_write())
    await asyncio.wait_for(writing.wait(), 5)
    read = await asyncio.wait_for(store.history(key), 5)
    assert [m.content for m in read] == ["committed"]
    done.set()
    await writer
    assert [m.content for m in await store.history(key)] == ["committed", "in progress"]


async def test_a_transaction_run_in_one_hand_off_is_still_all_or_nothing(sqlite: SQLiteStore) -> None:
    store = sqlite
    key = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="t1")
    statements: list[str] = []
    await store._db.set_trace_callback(statements.append)
    assert await store.append(key, [ChatMessage(role="user", content="hi")], event_id="e1")
    # The whole append, BEGIN to COMMIT, runs as one call on the connection's thread.
    assert [s.split()[0] for s in statements] == [
        "BEGIN",
        "SELECT",
        "SELECT",
        "INSERT",
        "INSERT",
        "COMMIT",
    ]
    await store._db.set_trace_callback(None)

    async def fails_halfway(db: Connection) -> None:
        await store._insert_messages(db, key, [ChatMessage(role="assistant", content="half")])
        raise ValueError("the rest of the round could not be written")

    with pytest.raises(ValueError):
        await store._transaction(fails_halfway)

    async def waits_on_the_loop(db: Connection) -> None:
        await store._insert_messages(db, key, [ChatMessage(role="assistant", content="half")])
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="waited on something other than its own statements"):
        await store._transaction(waits_on_the_loop)
    assert [m.content for m in await store.history(key)] == ["hi"]
    assert not await store.append(key, [ChatMessage(role="user", content="hi")], event_id="e1")
    assert [m.content for m in await store.history(key)] == ["hi"]

"""The memory ledger on SQLite and on PostgreSQL: whose memories each scope reaches, what the
operator's lists show, and NERVE_MEMORY_RETENTION's prune.

The scope checks are the canaries of `tests/test_memory_canaries.py` at the store's level: many
people and places, each memory carrying a canary, and every read of every scope checked for the
canaries it may not hold.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.config import Settings
from bot.runtime import open_runtime
from bot.store.base import ConversationStore
from bot.store.dialect import days_ago, iso_utc
from bot.store.memories import MemoryScope
from bot.store.prune import pruning_inbox
from bot.types import Memory
from tests.stores import Backend, ManualSchedule

pytestmark = pytest.mark.both_stores

PEOPLE = 12
PLACES = 4
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def person(i: int) -> str:
    return f"slack:T1:U{i:03d}"


def place(c: int) -> str:
    return f"slack:C{c:03d}"


def dm_of(i: int) -> str:
    return f"slack:D{i:03d}"


def anywhere(i: int) -> bool:
    return i % 3 == 0


async def save(
    store: ConversationStore, *, kind: str, subject: str, text: str, by: str, where: str
) -> Memory:
    return await store.add_memory(
        kind=kind,  # type: ignore[arg-type]
        subject=subject,
        text=text,
        anywhere=kind == "person" and anywhere(int(subject[-3:])),
        written_by=by,
        written_in=where,
    )


async def seeded(store: ConversationStore) -> tuple[dict[int, str], dict[int, str]]:
    """One canary memory per person (saved in their DM) and per place (saved by a person there)."""
    mine = {i: f"canary person {i:03d} PCAN{i:03d}" for i in range(PEOPLE)}
    ours = {c: f"canary place {c:03d} LCAN{c:03d}" for c in range(PLACES)}
    for i, text in mine.items():
        await save(store, kind="person", subject=person(i), text=text, by=person(i), where=dm_of(i))
    for c, text in ours.items():
        await save(store, kind="place", subject=place(c), text=text, by=person(c), where=place(c))
    return mine, ours


async def test_every_scope_reads_its_own_and_never_anyone_elses(store: ConversationStore) -> None:
    mine, ours = await seeded(store)
    checked = 0
    for i, c, private in itertools.product(range(PEOPLE), range(PLACES), (True, False)):
        scope = MemoryScope(person=person(i), place=dm_of(i) if private else place(c), private=private)
        recent = {m.text for m in await store.recent_memories(scope, 100)}
        searched = {m.text for m in await store.search_memories(scope, "canary person place", 100)}
        for seen in (recent, searched):
            expected = set()
            if private or anywhere(i):
                expected.add(mine[i])
            if not private:
                expected.add(ours[c])
            assert seen == expected, (i, c, private)
            checked += 1
    assert checked == PEOPLE * PLACES * 2 * 2


async def test_a_search_for_someone_elses_canary_finds_nothing(store: ConversationStore) -> None:
    await seeded(store)

    for i in range(PEOPLE):
        other = (i + 1) % PEOPLE
        for private in (True, False):
            scope = MemoryScope(
                person=person(i), place=place(0) if not private else dm_of(i), private=private
            )
            found = await store.search_memories(scope, f"PCAN{other:03d}", 10)
            assert [m.text for m in found] == []


async def test_the_operators_list_is_one_persons_or_one_places_newest_first(store: ConversationStore) -> None:
    first = await save(store, kind="person", subject=person(1), text="first", by=person(1), where=dm_of(1))
    second = await save(store, kind="person", subject=person(1), text="second", by=person(1), where=dm_of(1))
    here = await save(store, kind="place", subject=place(1), text="here", by=person(2), where=place(1))
    await save(store, kind="person", subject=person(2), text="bob's", by=person(2), where=dm_of(2))

    assert [m.id for m in await store.memories_of(person=person(1))] == [second.id, first.id]
    assert [m.id for m in await store.memories_of(place=place(1))] == [here.id]
    assert len(await store.memories_of()) == 4


async def backdate(backend: Backend, memory: Memory, days: float, now: datetime | None = NOW) -> None:
    stamp = days_ago(days) if now is None else iso_utc(now - timedelta(days=days))
    await backend.rows("UPDATE memories SET created_at = ? WHERE id = ?", (stamp, memory.id))


async def test_pruning_deletes_only_memories_saved_longer_ago(
    store: ConversationStore, store_backend: Backend
):
    old = await save(store, kind="person", subject=person(1), text="old", by=person(1), where=dm_of(1))
    older = await save(store, kind="place", subject=place(1), text="older", by=person(1), where=place(1))
    new = await save(store, kind="person", subject=person(1), text="new", by=person(1), where=dm_of(1))
    await backdate(store_backend, old, days=31)
    await backdate(store_backend, older, days=400)
    await backdate(store_backend, new, days=29)

    assert await store.prune_memories(30, now=NOW) == 2

    assert [m.id for m in await store.memories_of()] == [new.id]
    # What a prune took is gone from the full-text search too.
    scope = MemoryScope(person=person(1), place=place(1), private=True)
    assert [m.text for m in await store.search_memories(scope, "old older new", 10)] == ["new"]


async def test_the_hourly_prune_takes_old_memories_only_when_memory_retention_is_on(
    store: ConversationStore, store_backend: Backend
) -> None:
    old = await save(store, kind="person", subject=person(1), text="old", by=person(1), where=dm_of(1))
    await backdate(store_backend, old, days=45, now=None)
    schedule = ManualSchedule()

    async with asyncio.timeout(10):
        async with pruning_inbox(
            store, retention_hours=24, conversation_retention_days=30, wait=schedule.wait
        ):
            assert await schedule.waits.get() == 3600
        assert [m.id for m in await store.memories_of()] == [old.id], "off: kept until forgotten"

        async with pruning_inbox(
            store,
            retention_hours=24,
            conversation_retention_days=60,
            memory_retention=True,
            wait=schedule.wait,
        ):
            assert await schedule.waits.get() == 3600
            assert [m.id for m in await store.memories_of()] == [old.id], "younger than the retention"
            await backdate(store_backend, old, days=61, now=None)
            schedule.tick()
            assert await schedule.waits.get() == 3600
            assert await store.memories_of() == []


async def test_memory_retention_without_a_retention_in_days_keeps_everything(
    store: ConversationStore, store_backend: Backend
) -> None:
    old = await save(store, kind="person", subject=person(1), text="old", by=person(1), where=dm_of(1))
    await backdate(store_backend, old, days=3000, now=None)
    schedule = ManualSchedule()

    async with (
        asyncio.timeout(10),
        pruning_inbox(store, retention_hours=24, memory_retention=True, wait=schedule.wait),
    ):
        assert await schedule.waits.get() == 3600
        assert [m.id for m in await store.memories_of()] == [old.id]


async def test_a_running_nerve_prunes_memories_with_the_retention_settings(
    tmp_path: Path, store_backend: Backend
) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    async with await store_backend.open() as store:
        old = await save(store, kind="person", subject=person(1), text="old", by=person(1), where=dm_of(1))
        new = await save(store, kind="person", subject=person(1), text="new", by=person(1), where=dm_of(1))
    await backdate(store_backend, old, days=31, now=None)
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        **store_backend.settings(),
        nerve_mcp_config=tmp_path / "mcp.json",
        nerve_model="offline",
        nerve_retention_days=30,
        nerve_memory_retention=True,
    )

    async with asyncio.timeout(30), open_runtime(settings) as runtime:
        assert [m.id for m in await runtime.store.memories_of()] == [new.id]

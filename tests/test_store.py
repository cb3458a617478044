"""The store against real databases (SQLite files, and PostgreSQL for the tests that take
`store_backend`): round trips, atomic rounds, dedupe, inbox, crashes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from bot.config import Settings
from bot.errors import StoreError
from bot.runtime import open_runtime
from bot.seams import Inbox, Store
from bot.store.base import ConversationStore
from bot.store.connect import connect
from bot.store.dialect import days_ago
from bot.store.prune import pruning_inbox
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, ToolCall
from tests.stores import Backend, ManualSchedule

REPO = Path(__file__).resolve().parent.parent


def key(thread: str = "t1", *, channel: str = "C1", platform: str = "slack") -> ConversationKey:
    return ConversationKey(platform=platform, workspace="W1", channel=channel, thread=thread)


def a_round(prefix: str, n: int = 2) -> list[ChatMessage]:
    calls = tuple(
        ToolCall(id=f"{prefix}_{j}", name="get_environment_status", arguments=json.dumps({"area_code": j}))
        for j in range(n)
    )
    return [
        ChatMessage(role="assistant", tool_calls=calls),
        *(ChatMessage(role="tool", tool_call_id=c.id, name=c.name, content=f"result {c.id}") for c in calls),
    ]


pytestmark = pytest.mark.both_stores


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """For what only SQLite has (a file, pragmas, its lock)."""
    async with await SQLiteStore.open(tmp_path / "nerve.db") as opened:
        yield opened


async def raw_rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Read the file through a separate connection, as another process would."""
    async with aiosqlite.connect(path) as db:
        return [tuple(row) for row in await db.execute_fetchall(sql, params)]


async def test_every_message_kind_round_trips_exactly(store: ConversationStore) -> None:
    messages = [
        ChatMessage(role="system", content="You are nerve."),
        ChatMessage(role="user", content="Wie ist die Luft in 1010? 🌫️"),
        ChatMessage(
            role="assistant",
            content="Let me check.",
            tool_calls=(
                ToolCall(id="call_a", name="get_environment_status", arguments='{"area_code": "1010"}'),
                # Arguments stay the model's raw string, odd spacing, escapes and unicode included.
                ToolCall(
                    id="call_b", name="simulate_geolocation", arguments='{ "lat":12.5,"note":"\\"ü\\"\\n"}'
                ),
            ),
        ),
        ChatMessage(role="tool", tool_call_id="call_a", name="get_environment_status", content="PM2.5: 12"),
        ChatMessage(
            role="tool",
            tool_call_id="call_b",
            name="simulate_geolocation",
            content="service unavailable",
            is_error=True,
            latency_ms=380.25,
        ),
        ChatMessage(role="assistant", content=None, tool_calls=()),
        ChatMessage(role="assistant", content="Air is fine."),
    ]
    assert await store.append(key(), messages) is True

    restored = await store.history(key())

    assert restored == messages
    assert isinstance(restored[2].tool_calls, tuple)
    assert restored[4].latency_ms == 380.25
    assert restored[4].is_error is True and restored[3].is_error is False


async def test_messages_keep_their_order_across_many_appends(store: ConversationStore) -> None:
    for i in range(30):
        await store.append(key(), [ChatMessage(role="user", content=str(i))])

    assert [m.content for m in await store.history(key())] == [str(i) for i in range(30)]


async def test_a_round_that_fails_midway_leaves_nothing_behind(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(key(), [ChatMessage(role="user", content="hi")])
    broken = [*a_round("r1"), ChatMessage(role="tool", tool_call_id=None, content="no id")]

    with pytest.raises(StoreError, match="nothing was saved"):
        await store.append(key(), broken)

    assert [m.role for m in await store.history(key())] == ["user"]
    assert await store_backend.rows("SELECT count(*) FROM messages") == [(1,)]
    # No transaction was left open: the next write goes through.
    assert await store.append(key(), a_round("r2"))
    assert [m.role for m in await store.history(key())] == ["user", "assistant", "tool", "tool"]


async def test_a_cancelled_append_stores_the_whole_round_or_nothing(store: ConversationStore) -> None:
    outcomes = set()
    for yields in range(12):
        thread = f"t{yields}"
        task = asyncio.create_task(store.append(key(thread), a_round(thread, n=3)))
        for _ in range(yields):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        stored = await store.history(key(thread))
        assert len(stored) in (0, 4), f"cancelled after {yields} yields left a partial round: {stored}"
        outcomes.add(len(stored))
        assert await store.append(key(thread), [ChatMessage(role="user", content="after")])
    assert 0 in outcomes


async def test_a_redelivered_user_message_is_a_no_op(store: ConversationStore) -> None:
    user = ChatMessage(role="user", content="status of 1010?")

    assert await store.append(key(), [user], event_id="Ev1") is True
    assert await store.append(key(), [user], event_id="Ev1") is False
    assert await store.append(key(), [user], event_id="Ev2") is True

    assert [m.content for m in await store.history(key())] == [user.content, user.content]
    async with store._read() as db:
        assert await store._event_seen(db, key(), "Ev1")
        assert not await store._event_seen(db, key(), "Ev3")
        assert not await store._event_seen(db, key("other"), "Ev1")


async def test_messages_after_an_event_are_that_turn_only(store: ConversationStore) -> None:
    first_turn = [*a_round("r1"), ChatMessage(role="assistant", content="first answer")]
    await store.append(key(), [ChatMessage(role="user", content="one")], event_id="Ev1")
    await store.append(key(), first_turn[:3])
    await store.append(key(), first_turn[3:])
    await store.append(key(), [ChatMessage(role="user", content="two")], event_id="Ev2")
    await store.append(key(), [ChatMessage(role="assistant", content="second answer")])
    await store.append(key(), [ChatMessage(role="user", content="three")], event_id="Ev3")

    assert await store.messages_after_event(key(), "Ev1") == first_turn
    assert await store.messages_after_event(key(), "Ev2") == [
        ChatMessage(role="assistant", content="second answer")
    ]
    assert await store.messages_after_event(key(), "Ev3") == []
    assert await store.messages_after_event(key(), "unknown") == []
    assert await store.messages_after_event(key("other"), "Ev1") == []
    await store.reset(key())
    assert await store.messages_after_event(key(), "Ev2") == [
        ChatMessage(role="assistant", content="second answer")
    ]


async def test_a_message_whose_turn_was_cut_off_is_answered_with_the_next(store: ConversationStore) -> None:
    """A stop cut off the turn of "one" after its message was stored; "two" came next, and the model,
    sent both together, answered both: "one" delivered again gets that answer, not a turn of its own."""
    await store.append(key(), [ChatMessage(role="user", content="one")], event_id="Ev1")
    await store.append(key(), a_round("r1"))
    await store.append(key(), [ChatMessage(role="user", content="two")], event_id="Ev2")
    answer = ChatMessage(role="assistant", content="both answered")
    await store.append(key(), [answer])
    await store.append(key(), [ChatMessage(role="user", content="three")], event_id="Ev3")

    assert await store.messages_after_event(key(), "Ev1") == [
        *a_round("r1"),
        ChatMessage(role="user", content="two"),
        answer,
    ]
    assert await store.messages_after_event(key(), "Ev2") == [answer]
    assert await store.messages_after_event(key(), "Ev3") == []


async def test_a_redelivery_after_reset_is_still_a_no_op(store: ConversationStore) -> None:
    await store.append(key(), [ChatMessage(role="user", content="old")], event_id="Ev1")
    await store.reset(key())

    assert await store.append(key(), [ChatMessage(role="user", content="old")], event_id="Ev1") is False
    assert await store.history(key()) == []


async def test_reset_starts_fresh_and_keeps_the_old_rows(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(key(), [ChatMessage(role="user", content="before")])
    await store.reset(key())
    assert await store.history(key()) == []

    await store.append(key(), [ChatMessage(role="user", content="after")])

    assert [m.content for m in await store.history(key())] == ["after"]
    rows = await store_backend.rows(
        "SELECT c.archived_at IS NULL, m.content, m.seq FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id ORDER BY m.id",
    )
    assert rows == [(0, "before", 1), (1, "after", 1)]


async def test_resetting_a_thread_without_history_is_harmless(store: ConversationStore) -> None:
    await store.reset(key())
    await store.reset(key())
    assert await store.history(key()) == []


async def test_two_users_dms_never_mix(store: ConversationStore) -> None:
    alice = ConversationKey(platform="slack", workspace="W1", channel="D_ALICE", thread="D_ALICE")
    bob = ConversationKey(platform="slack", workspace="W1", channel="D_BOB", thread="D_BOB")
    same_ids_on_discord = ConversationKey(
        platform="discord", workspace="W1", channel="D_ALICE", thread="D_ALICE"
    )

    await store.append(alice, [ChatMessage(role="user", content="alice's secret")])
    await store.append(bob, [ChatMessage(role="user", content="bob's question")])
    await store.reset(bob)

    assert [m.content for m in await store.history(alice)] == ["alice's secret"]
    assert await store.history(bob) == []
    assert await store.history(same_ids_on_discord) == []
    assert await store.conversations("slack") == [alice]
    assert await store.conversations() == [alice]


async def test_concurrent_appends_to_many_keys_all_land(store: ConversationStore) -> None:
    keys = [key(f"t{i}") for i in range(20)]

    async def writer(k: ConversationKey, n: int) -> None:
        await store.append(
            k, [ChatMessage(role="user", content=f"{k.thread}-{n}")], event_id=f"{k.thread}-{n}"
        )
        await store.append(k, a_round(f"{k.thread}_{n}"))

    async with asyncio.timeout(30):
        await asyncio.gather(*(writer(k, n) for k in keys for n in range(10)))

    for k in keys:
        stored = await store.history(k)
        assert len(stored) == 10 * 4
        assert sorted(m.content or "" for m in stored if m.role == "user") == sorted(
            f"{k.thread}-{n}" for n in range(10)
        )
        # Rounds never interleave: each assistant call message is followed by exactly its results.
        for i, message in enumerate(stored):
            if message.tool_calls:
                ids = [c.id for c in message.tool_calls]
                assert [m.tool_call_id for m in stored[i + 1 : i + 1 + len(ids)]] == ids


async def test_the_inbox_claims_each_event_once_and_lists_the_unfinished(store_backend: Backend) -> None:
    async with await store_backend.open() as store:
        assert await store.claim_event("slack", "Ev1", '{"text": "one"}') is True
        assert await store.claim_event("slack", "Ev2", '{"text": "two"}') is True
        assert await store.claim_event("slack", "Ev3", '{"text": "three"}') is True
        assert await store.claim_event("slack", "Ev1", '{"text": "one again"}') is False
        assert await store.claim_event("discord", "Ev1", "{}") is True
        await store.finish_event("slack", "Ev2")
        await store.finish_event("slack", "Ev2")
        assert await store.claim_event("slack", "Ev2", "{}") is False

    # After a restart the interrupted events are still there, in the order they arrived.
    async with await store_backend.open() as store:
        assert await store.unfinished_events("slack") == [
            ("Ev1", '{"text": "one"}'),
            ("Ev3", '{"text": "three"}'),
        ]
        assert await store.unfinished_events("discord") == [("Ev1", "{}")]
        assert await store.unfinished_events("terminal") == []


async def test_pruning_forgets_only_old_events(store: ConversationStore, store_backend: Backend) -> None:
    await store.claim_event("slack", "old", "{}")
    await store.claim_event("slack", "new", "{}")
    await age_event(store_backend, "old", hours=10 * 24)

    assert await store.prune_events(older_than_days=7) == 1
    assert await store.prune_events(older_than_days=0.5) == 0

    assert await store.unfinished_events("slack") == [("new", "{}")]
    assert await store.claim_event("slack", "old", "{}") is True


async def test_the_database_runs_in_wal_with_foreign_keys_and_a_busy_timeout(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    assert await raw_rows(tmp_path / "nerve.db", "PRAGMA journal_mode") == [("wal",)]
    db = sqlite_store._db
    assert list(await db.execute_fetchall("PRAGMA foreign_keys")) == [(1,)]
    assert list(await db.execute_fetchall("PRAGMA busy_timeout")) == [(5000,)]
    assert list(await db.execute_fetchall("PRAGMA synchronous")) == [(1,)]  # NORMAL


async def test_a_locked_database_gives_a_plain_store_error(tmp_path: Path) -> None:
    path = tmp_path / "nerve.db"
    async with await SQLiteStore.open(path, busy_timeout_ms=50) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match="database is locked") as caught:
                await store.append(key(), [ChatMessage(role="user", content="hi")])
            assert "Traceback" not in caught.value.message
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await store.append(key(), [ChatMessage(role="user", content="hi")])


async def test_processes_opening_a_new_file_at_once_all_get_in(tmp_path: Path) -> None:
    # Switching a new file to WAL takes its write lock; two openers meeting there deadlock, and SQLite
    # answers one of them "locked" at once instead of calling the busy handler.
    for attempt in range(40):
        path = tmp_path / f"nerve-{attempt}.db"
        opened = await asyncio.gather(*(connect(path, 5000) for _ in range(3)), return_exceptions=True)
        for db in opened:
            if isinstance(db, aiosqlite.Connection):
                await db.close()
        assert all(isinstance(db, aiosqlite.Connection) for db in opened), opened


async def test_a_file_that_is_not_a_database_is_refused_plainly(tmp_path: Path) -> None:
    path = tmp_path / "nerve.db"
    path.write_bytes(b"this is a text file, not SQLite" * 100)

    with pytest.raises(StoreError, match="not a usable nerve database"):
        await SQLiteStore.open(path)


async def test_open_creates_missing_folders(tmp_path: Path) -> None:
    async with await SQLiteStore.open(tmp_path / "a" / "b" / "nerve.db") as store:
        assert await store.append(key(), [ChatMessage(role="user", content="hi")])
    assert (tmp_path / "a" / "b" / "nerve.db").exists()


async def test_a_closed_store_says_so(store_backend: Backend) -> None:
    store = await store_backend.open()
    await store.close()
    await store.close()

    with pytest.raises(StoreError, match="closed"):
        await store.history(key())


async def test_the_store_fills_the_store_and_inbox_seams(store: ConversationStore) -> None:
    seam: Store = store
    inbox: Inbox = store
    assert await seam.append(key(), [ChatMessage(role="user", content="hi")])
    assert len(await seam.history(key())) == 1
    assert await inbox.claim_event("slack", "Ev1", "{}")


async def run_and_kill_worker(location: str, first: int) -> int:
    """Run the worker until it reported some rounds, SIGKILL it at a random moment; rounds reported."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        str(REPO / "tests" / "store_worker.py"),
        location,
        str(first),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert worker.stdout is not None and worker.stderr is not None
    reported = 0
    kill = None
    try:
        async with asyncio.timeout(30):
            while line := await worker.stdout.readline():
                reported += 1
                assert line.decode().split() == ["round", str(first + reported - 1)]
                if reported == 15:
                    # Not right after a print (the worker would always be at the same step): at a
                    # random moment soon after, so the kill lands anywhere, mid-transaction included.
                    kill = asyncio.get_running_loop().call_later(random.uniform(0, 0.03), worker.kill)
            await worker.wait()
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
        if kill is not None:
            kill.cancel()
    stderr = (await worker.stderr.read()).decode(errors="replace")
    assert worker.returncode == -signal.SIGKILL, f"worker exited on its own: {stderr}"
    return reported


async def test_a_killed_writer_leaves_every_reported_round_whole(store_backend: Backend) -> None:
    worker_key = ConversationKey(platform="crash", workspace="w", channel="c", thread="t")
    reported = 0
    for cycle in range(5):
        reported += await run_and_kill_worker(store_backend.location, first=cycle * 1000)

        if store_backend.name == "sqlite":
            assert await store_backend.rows("PRAGMA integrity_check") == [("ok",)]
        async with await store_backend.open() as store:
            stored = await store.history(worker_key)
        rounds = 0
        for i, message in enumerate(stored):
            if message.tool_calls:
                ids = [c.id for c in message.tool_calls]
                following = stored[i + 1 : i + 1 + len(ids)]
                assert [(m.role, m.tool_call_id) for m in following] == [("tool", id_) for id_ in ids], (
                    f"cycle {cycle}: the round at message {i} is incomplete"
                )
                rounds += 1
        # No stray tool results: every one belongs to a complete round counted above.
        assert sum(1 for m in stored if m.role == "tool") == rounds * 3
        # Every round the worker reported as committed survived the kill.
        assert rounds >= reported

    async with await store_backend.open() as store:
        assert await store.append(worker_key, [ChatMessage(role="user", content="after the crash")])
        assert (await store.history(worker_key))[-1].content == "after the crash"


async def test_a_reset_by_another_process_sends_the_next_message_into_the_new_conversation(
    store_backend: Backend,
) -> None:
    async with await store_backend.open() as chat, await store_backend.open() as other:
        await chat.append(key(), [ChatMessage(role="user", content="before the reset")])
        await other.reset(key())

        await chat.append(key(), [ChatMessage(role="user", content="after the reset")])

        assert [m.content for m in await chat.history(key())] == ["after the reset"]
        assert [m.content for m in await other.history(key())] == ["after the reset"]
    rows = await store_backend.rows(
        "SELECT c.archived_at IS NULL, m.content FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id ORDER BY m.id",
    )
    assert rows == [(0, "before the reset"), (1, "after the reset")]


async def age_event(backend: Backend, event_id: str, hours: float) -> None:
    await backend.rows(
        "UPDATE inbox SET received_at = ? WHERE event_id = ?", (days_ago(hours / 24), event_id)
    )


async def test_the_inbox_is_pruned_at_start_and_then_on_its_schedule(
    store: ConversationStore, store_backend: Backend
) -> None:
    schedule = ManualSchedule()

    async def event_ids() -> list[object]:
        return [row[0] for row in await store_backend.rows("SELECT event_id FROM inbox ORDER BY rowid")]

    for event_id in ("old", "old-unfinished", "recent"):
        await store.claim_event("slack", event_id, "{}")
    await store.finish_event("slack", "old")
    await age_event(store_backend, "old", hours=30)
    await age_event(store_backend, "old-unfinished", hours=25)

    # The store's own tasks (a connection pool's workers) are not the pruning's.
    before = asyncio.all_tasks()
    async with asyncio.timeout(10):
        async with pruning_inbox(store, retention_hours=24, every=3600, wait=schedule.wait):
            # Pruned before the block runs: a replay at start-up never sees entries past retention.
            assert await event_ids() == ["recent"]
            assert await schedule.waits.get() == 3600
            await store.claim_event("slack", "later", "{}")
            await age_event(store_backend, "recent", hours=24.5)
            schedule.tick()
            # The next wait begins only after the scheduled pruning finished.
            assert await schedule.waits.get() == 3600
            assert await event_ids() == ["later"]
        pending = [task for task in asyncio.all_tasks() - before if task is not asyncio.current_task()]
        assert pending == []


async def test_a_failed_pruning_is_logged_and_tried_again_on_schedule(
    store_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = await store_backend.open()
    await store.close()
    waits: asyncio.Queue[float] = asyncio.Queue()

    async def wait(seconds: float) -> None:
        waits.put_nowait(seconds)
        await asyncio.Event().wait()

    async with asyncio.timeout(10), pruning_inbox(store, retention_hours=24, every=60, wait=wait):
        assert await waits.get() == 60
    assert "could not prune the inbox" in caplog.text and "closed" in caplog.text


async def test_a_running_nerve_prunes_the_inbox_with_the_retention_setting(
    tmp_path: Path, store_backend: Backend
) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    async with await store_backend.open() as store:
        await store.claim_event("slack", "stale", "{}")
        await store.claim_event("slack", "fresh", "{}")
    await age_event(store_backend, "stale", hours=3)
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        **store_backend.settings(),
        nerve_mcp_config=tmp_path / "mcp.json",
        nerve_model="offline",
        nerve_inbox_retention_hours=2,
    )

    async with asyncio.timeout(30), open_runtime(settings) as runtime:
        assert await runtime.store.unfinished_events("slack") == [("fresh", "{}")]


async def test_pruning_runs_hourly_or_twice_per_retention_when_that_is_shorter(
    store: ConversationStore,
) -> None:
    waits: asyncio.Queue[float] = asyncio.Queue()

    async def wait(seconds: float) -> None:
        waits.put_nowait(seconds)
        await asyncio.Event().wait()

    async with asyncio.timeout(10):
        async with pruning_inbox(store, retention_hours=24, wait=wait):
            assert await waits.get() == 3600
        async with pruning_inbox(store, retention_hours=0.5, wait=wait):
            assert await waits.get() == 900


async def test_the_posts_of_a_turn_are_announced_then_recorded_and_pruned(store: ConversationStore) -> None:
    """What a turn posted survives for its second run: in doubt until recorded, then where it landed."""
    assert await store.posts_of("slack:Ev1") == {}
    await store.intend_post("slack:Ev1", "answer:0")
    await store.intend_post("slack:Ev1", "answer:0")  # announced twice: still one part, still in doubt
    assert await store.posts_of("slack:Ev1") == {"answer:0": None}
    await store.record_post("slack:Ev1", "answer:0", "C1:1.0")
    await store.record_post("slack:Ev1", "live", "C1:0.9")  # recorded without an announcement
    assert await store.posts_of("slack:Ev1") == {"answer:0": "C1:1.0", "live": "C1:0.9"}
    assert await store.posts_of("slack:Ev2") == {}
    assert await store.prune_posts(older_than_days=1) == 0
    assert await store.prune_posts(older_than_days=-1) == 2
    assert await store.posts_of("slack:Ev1") == {}

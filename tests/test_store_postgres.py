"""What only the PostgreSQL store has: its migrations next to SQLite's, start-up under an advisory
lock, plain errors for a server that is not there, and turns held with advisory locks.

Each test gets a schema of its own on NERVE_TEST_DATABASE_URL (tests/stores.py); when that server
cannot be reached the tests fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from bot.errors import ConfigError, StoreError
from bot.seams import TurnLock
from bot.store.choose import open_postgres_store
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR, discover
from bot.store.postgres import TURN_LOCKS, PostgresStore
from bot.store.postgres_connection import lock_key
from bot.store.postgres_migrate import POSTGRES_MIGRATIONS_DIR
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage
from tests.stores import PostgresBackend, postgres_backend
from tests.turn_worker import KEY

REPO = Path(__file__).resolve().parent.parent
# Run as a module from the checkout, so that it imports the suite's helpers as the tests do.
WORKER = ("-m", "tests.turn_worker")


@pytest.fixture
async def pg() -> AsyncIterator[PostgresBackend]:
    async with postgres_backend() as backend:
        yield backend


# --- migrations --------------------------------------------------------------------------------


def test_both_databases_have_the_same_migrations() -> None:
    sqlite = [(m.version, m.name) for m in discover(DEFAULT_MIGRATIONS_DIR)]
    postgres = [(m.version, m.name) for m in discover(POSTGRES_MIGRATIONS_DIR)]

    assert postgres == sqlite


async def test_a_blank_schema_gets_the_same_tables_and_columns_as_sqlite(
    pg: PostgresBackend, tmp_path: Path
) -> None:
    async with await pg.open():
        pass
    async with await SQLiteStore.open(tmp_path / "nerve.db"):
        pass
    async with aiosqlite.connect(tmp_path / "nerve.db") as db:
        names = [
            str(row[0])
            for row in await db.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        sqlite = {
            name: {str(c[1]) for c in await db.execute_fetchall(f"PRAGMA table_info({name})")}
            for name in names
        }
    columns = await pg.rows(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = ?", (pg.schema,)
    )
    postgres: dict[str, set[str]] = {}
    for table, column in columns:
        postgres.setdefault(table, set()).add(column)

    # The turn queue is a table on SQLite only: PostgreSQL queues turns on advisory locks. The
    # memories' full-text index is FTS5's tables on SQLite, their `search` column on PostgreSQL.
    full_text = {name for name in sqlite if name.startswith("memories_search")}
    assert set(postgres) == set(sqlite) - {"turn_locks"} - full_text
    for table, names_there in postgres.items():
        # rowid is SQLite's implicit insertion order, a column of that name on PostgreSQL.
        assert names_there - {"rowid"} - ({"search"} if table == "memories" else set()) == sqlite[table], (
            table
        )
    ledger = await pg.rows(
        "SELECT version, name, applied_at LIKE '____-__-__T__:__:__.___Z' FROM schema_migrations"
    )
    assert sorted(ledger) == [(m.version, m.name, True) for m in discover(POSTGRES_MIGRATIONS_DIR)]


async def test_processes_starting_together_migrate_once(pg: PostgresBackend) -> None:
    async with asyncio.timeout(60):
        stores = await asyncio.gather(*(pg.open() for _ in range(4)))
    try:
        assert await stores[0].append(KEY, [ChatMessage(role="user", content="hi")])
        assert [m.content for m in await stores[3].history(KEY)] == ["hi"]
    finally:
        for store in stores:
            await store.close()
    versions = [row[0] for row in await pg.rows("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == [m.version for m in discover(POSTGRES_MIGRATIONS_DIR)]


async def test_a_database_written_by_a_newer_nerve_is_refused(pg: PostgresBackend) -> None:
    async with await pg.open():
        pass
    await pg.rows("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')")

    with pytest.raises(StoreError, match=r"migration 9999.*newer nerve.*NERVE_DATABASE_URL"):
        await pg.open()


async def test_a_failing_migration_is_rolled_back_whole_and_named(
    pg: PostgresBackend, tmp_path: Path
) -> None:
    folder = tmp_path / "migrations"
    shutil.copytree(POSTGRES_MIGRATIONS_DIR, folder)
    (folder / "0100_broken.sql").write_text(
        "CREATE TABLE half_done (id INTEGER);\nALTER TABLE no_such_table ADD COLUMN x TEXT;\n"
    )

    with pytest.raises(StoreError, match=r"0100_broken\.sql failed and was rolled back"):
        await PostgresStore.open(pg.location, migrations_dir=folder)

    assert await pg.rows("SELECT count(*) FROM information_schema.tables WHERE table_name = 'half_done'") == [
        (0,)
    ]
    shipped = max(int(f.name[:4]) for f in POSTGRES_MIGRATIONS_DIR.glob("*.sql"))
    assert await pg.rows("SELECT max(version) FROM schema_migrations") == [(shipped,)]
    # The shipped migrations stayed: the store opens and works.
    async with await pg.open() as store:
        assert await store.append(KEY, [ChatMessage(role="user", content="still fine")])


# --- errors an operator can act on ---------------------------------------------------------------


async def test_a_server_that_is_not_there_is_a_plain_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="cannot reach the conversation store") as caught:
        await open_postgres_store("postgresql://nerve:hunter2@127.0.0.1:1/nerve")

    assert "hunter2" not in caught.value.message
    assert "postgresql://nerve@127.0.0.1:1/nerve" in caught.value.message
    assert "NERVE_DATABASE_URL" in caught.value.message


async def test_a_url_that_is_not_postgresql_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigError, match="must be a PostgreSQL URL"):
        await open_postgres_store("mysql://nerve@127.0.0.1/nerve")


async def test_a_search_path_naming_no_existing_schema_says_what_to_do(pg: PostgresBackend) -> None:
    missing = pg.location.replace(pg.schema, f"{pg.schema}_missing")

    with pytest.raises(StoreError, match="create the schema"):
        await PostgresStore.open(missing)


# --- turns across processes ----------------------------------------------------------------------


async def lock_requests(pg: PostgresBackend, store: PostgresStore) -> int:
    """Sessions holding or waiting for KEY's turn lock: the server's own queue."""
    namespace, hashed = lock_key(TURN_LOCKS, store.turn_lock._name(KEY))
    rows = await pg.rows(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = ?::bigint::oid"
        " AND objid = ?::bigint::oid AND objsubid = 2",
        (namespace, hashed % 2**32),
    )
    return int(rows[0][0])


async def wait_for_requests(pg: PostgresBackend, store: PostgresStore, count: int) -> None:
    async with asyncio.timeout(10):
        # The queue lives in the server: nothing notifies this process when it grows.
        while await lock_requests(pg, store) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def arrived(a: PostgresStore, b: PostgresStore, count: int) -> None:
    """Wait until `count` turns entered the lock in the two processes: the arrival order expected."""
    async with asyncio.timeout(10):
        # The turns are tasks of this loop: each yield lets the newest one reach the lock.
        while a.turn_lock.turns_in(KEY) + b.turn_lock.turns_in(KEY) < count:  # noqa: ASYNC110
            await asyncio.sleep(0)


async def test_waiting_turns_of_two_processes_get_the_conversation_in_arrival_order(
    pg: PostgresBackend,
) -> None:
    a = await pg.open()
    b = await pg.open()
    assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
    try:
        order: list[str] = []
        inside = 0

        async def turn(lock: TurnLock, name: str) -> None:
            nonlocal inside
            async with lock.hold(KEY):
                inside += 1
                order.append(name)
                await asyncio.sleep(0.01)  # let any overlapping turn run here if it could
                if name != "a4":
                    # The next turn in line reaches the server's queue while this one holds (on a busy
                    # machine its request can take longer than this turn's work).
                    await wait_for_requests(pg, a, 2)
                assert inside == 1, f"{name} ran while another turn held the conversation"
                inside -= 1

        async with asyncio.timeout(20), asyncio.TaskGroup() as turns, a.turn_lock.hold(KEY):
            for number, (store, name) in enumerate([(b, "b1"), (a, "a2"), (b, "b3"), (a, "a4")], start=2):
                turns.create_task(turn(store.turn_lock, name))
                await arrived(a, b, number)
            assert order == []
            # Only the first waiting turn of each process waits on the server (the holder and b1).
            await wait_for_requests(pg, a, 2)
            assert await lock_requests(pg, a) == 2

        assert order == ["b1", "a2", "b3", "a4"]
        assert await lock_requests(pg, a) == 0
    finally:
        await a.close()
        await b.close()


async def test_a_cancelled_waiting_turn_leaves_the_queue_and_writes_go_on_meanwhile(
    pg: PostgresBackend,
) -> None:
    a = await pg.open()
    b = await pg.open()
    assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
    try:
        async with asyncio.timeout(20):
            async with a.turn_lock.hold(KEY):
                waiting = asyncio.create_task(_hold_once(b.turn_lock))
                await wait_for_requests(pg, a, 2)
                # A waiting turn blocks no writer, in this process or another.
                assert await b.append(KEY, [ChatMessage(role="user", content="written while a turn waits")])
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
                assert await lock_requests(pg, a) == 1
            async with b.turn_lock.hold(KEY):
                assert await lock_requests(pg, a) == 1
        assert await lock_requests(pg, a) == 0
    finally:
        await a.close()
        await b.close()


async def _hold_once(lock: TurnLock) -> None:
    async with lock.hold(KEY):
        pass


async def test_a_conversation_held_by_a_killed_process_is_taken_over_at_once(pg: PostgresBackend) -> None:
    store = await pg.open()
    assert isinstance(store, PostgresStore)
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        *WORKER,
        "hold",
        pg.location,
        "600",
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stderr is not None
        async with asyncio.timeout(20):
            line = await holder.stdout.readline()
        assert line.decode().strip() == "holding", (await holder.stderr.read()).decode(errors="replace")
        # Alive, it keeps the conversation.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1), store.turn_lock.hold(KEY):
                raise AssertionError("the conversation was taken from a live process")

        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        killed = time.monotonic()
        async with asyncio.timeout(60), store.turn_lock.hold(KEY):
            waited = time.monotonic() - killed
        assert holder.returncode == -signal.SIGKILL
        # No lease to wait out (the holder asked for 600 s): its lock went with its connection.
        # Generous, so a busy machine passes; a tenth of the lease.
        assert waited < 60
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
        await store.close()

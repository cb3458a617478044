"""Migrations: a blank database, an upgrade that keeps the data, and the refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from adapters.slack.events import Identity, classify
from bot.errors import StoreError
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR, apply_one, discover, migrate
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, ToolCall

KEY = ConversationKey(platform="slack", workspace="W1", channel="C1", thread="t1")


async def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    async with aiosqlite.connect(path) as db:
        return [tuple(row) for row in await db.execute_fetchall(sql)]


async def tables(path: Path) -> set[str]:
    return {str(r[0]) for r in await rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    """A private migrations folder holding a copy of the shipped 0001."""
    folder = tmp_path / "migrations"
    folder.mkdir()
    shutil.copy(DEFAULT_MIGRATIONS_DIR / "0001_initial.sql", folder)
    return folder


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A private migrations folder holding a copy of every shipped migration: the store's ledgers
    read and write the newest schema, so a test that stores through them starts from it."""
    folder = tmp_path / "shipped"
    shutil.copytree(DEFAULT_MIGRATIONS_DIR, folder, ignore=shutil.ignore_patterns("postgres"))
    return folder


SHIPPED = [m.version for m in discover(DEFAULT_MIGRATIONS_DIR)]
NEXT = SHIPPED[-1] + 1


def test_the_shipped_migrations_are_found_next_to_the_package() -> None:
    found = discover(DEFAULT_MIGRATIONS_DIR)

    assert Path(__file__).resolve().parent.parent / "migrations" == DEFAULT_MIGRATIONS_DIR
    assert (found[0].version, found[0].name) == (1, "initial")
    assert [m.version for m in found] == sorted(m.version for m in found)


async def test_a_blank_database_gets_the_whole_schema_and_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "nerve.db"
    async with aiosqlite.connect(path, isolation_level=None) as db:
        applied = await migrate(db)
        again = await migrate(db)

    assert applied == [m.version for m in discover(DEFAULT_MIGRATIONS_DIR)]
    assert again == []
    assert {"conversations", "messages", "inbox", "schema_migrations"} <= await tables(path)
    ledger = await rows(
        path, "SELECT version, name, applied_at IS NOT NULL FROM schema_migrations ORDER BY version"
    )
    assert ledger[0] == (1, "initial", 1)


async def test_an_upgrade_keeps_the_data_and_records_both_migrations(tmp_path: Path, shipped: Path) -> None:
    path = tmp_path / "nerve.db"
    stored = [
        ChatMessage(role="user", content="status of 1010?"),
        ChatMessage(
            role="assistant", tool_calls=(ToolCall(id="c1", name="get_status", arguments='{"a": 1}'),)
        ),
        ChatMessage(role="tool", tool_call_id="c1", name="get_status", content="fine", latency_ms=12.0),
    ]
    async with await SQLiteStore.open(path, migrations_dir=shipped) as store:
        await store.append(KEY, stored, event_id="Ev1")
        await store.claim_event("slack", "Ev1", "{}")
    assert await rows(path, "SELECT version FROM schema_migrations ORDER BY version") == [
        (v,) for v in SHIPPED
    ]

    (shipped / f"{NEXT:04d}_message_model.sql").write_text(
        "-- Which model wrote an assistant message.\n"
        "ALTER TABLE messages ADD COLUMN model TEXT;\n"
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, conversation_id INTEGER REFERENCES conversations);\n"
        "UPDATE messages SET model = 'gpt-test' WHERE role = 'assistant';\n"
    )
    async with await SQLiteStore.open(path, migrations_dir=shipped) as store:
        assert await store.history(KEY) == stored
        assert await store.append(KEY, [stored[0]], event_id="Ev1") is False
        assert await store.unfinished_events("slack") == [("Ev1", "{}")]

    ledger = await rows(path, "SELECT version, name FROM schema_migrations ORDER BY version")
    assert ledger[0] == (1, "initial")
    assert ledger[-1] == (NEXT, "message_model")
    assert [v for v, _ in ledger] == [*SHIPPED, NEXT]
    assert await rows(path, "SELECT role, model FROM messages ORDER BY seq") == [
        ("user", None),
        ("assistant", "gpt-test"),
        ("tool", None),
    ]
    assert "notes" in await tables(path)


async def test_a_failing_migration_is_rolled_back_whole(tmp_path: Path, shipped: Path) -> None:
    path = tmp_path / "nerve.db"
    async with await SQLiteStore.open(path, migrations_dir=shipped) as store:
        await store.append(KEY, [ChatMessage(role="user", content="keep me")])
    (shipped / f"{NEXT:04d}_broken.sql").write_text(
        "CREATE TABLE extra (x INTEGER);\nDELETE FROM messages;\nINSERT INTO no_such_table VALUES (1);\n"
    )

    with pytest.raises(
        StoreError, match=rf"{NEXT:04d}_broken\.sql failed and was rolled back: no such table"
    ):
        await SQLiteStore.open(path, migrations_dir=shipped)

    assert "extra" not in await tables(path)
    assert await rows(path, "SELECT content FROM messages") == [("keep me",)]
    assert await rows(path, "SELECT version FROM schema_migrations ORDER BY version") == [
        (v,) for v in SHIPPED
    ]


async def test_a_database_from_a_newer_nerve_is_refused(tmp_path: Path, migrations: Path) -> None:
    path = tmp_path / "nerve.db"
    async with await SQLiteStore.open(path, migrations_dir=migrations):
        pass
    async with aiosqlite.connect(path) as db:
        await db.execute("INSERT INTO schema_migrations (version, name) VALUES (7, 'from_the_future')")
        await db.commit()

    with pytest.raises(StoreError, match=r"migration 0007.*only up to 0001.*newer nerve"):
        await SQLiteStore.open(path, migrations_dir=migrations)


async def test_a_misnamed_migration_file_is_an_error_not_skipped(tmp_path: Path, migrations: Path) -> None:
    (migrations / "2_add_things.sql").write_text("CREATE TABLE things (x);\n")

    with pytest.raises(StoreError, match=r"2_add_things\.sql: migration files must be named NNNN_name\.sql"):
        await SQLiteStore.open(tmp_path / "nerve.db", migrations_dir=migrations)


async def test_two_files_with_one_version_are_an_error(tmp_path: Path, migrations: Path) -> None:
    (migrations / "0001_again.sql").write_text("CREATE TABLE things (x);\n")

    with pytest.raises(StoreError, match="version 1 is used by two files"):
        await SQLiteStore.open(tmp_path / "nerve.db", migrations_dir=migrations)


async def test_a_migration_that_commits_by_itself_is_reported(tmp_path: Path, migrations: Path) -> None:
    (migrations / "0002_commits.sql").write_text("CREATE TABLE things (x);\nCOMMIT;\n")

    with pytest.raises(StoreError, match="ended the transaction itself"):
        await SQLiteStore.open(tmp_path / "nerve.db", migrations_dir=migrations)


async def test_a_missing_migrations_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="migrations folder not found"):
        await SQLiteStore.open(tmp_path / "nerve.db", migrations_dir=tmp_path / "nowhere")


async def test_a_migration_another_process_applied_first_is_skipped(tmp_path: Path, migrations: Path) -> None:
    path = tmp_path / "nerve.db"
    (migrations / "0002_counter.sql").write_text(
        "CREATE TABLE counter (n INTEGER);\nINSERT INTO counter VALUES (1);\n"
    )
    async with (
        aiosqlite.connect(path, isolation_level=None) as winner,
        aiosqlite.connect(path, isolation_level=None) as loser,
    ):
        # The loser read the ledger while it was still empty; the winner then migrated everything.
        pending = discover(migrations)
        assert await migrate(winner, migrations) == [1, 2]

        assert [await apply_one(loser, migration) for migration in pending] == [False, False]
        assert not loser.in_transaction

    assert await rows(path, "SELECT n FROM counter") == [(1,)]
    assert await rows(path, "SELECT version FROM schema_migrations ORDER BY version") == [(1,), (2,)]


SECRET = "xoxb-secret-0000-never-store-me"


def slack_body(event_id: str) -> dict[str, object]:
    """An Events API delivery as the first schema stored it: the whole body, verification token and all."""
    return {
        "token": SECRET,
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1600000000,
        "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
        "event": {
            "type": "app_mention",
            "user": "U1",
            "text": "<@UBOT> is the air &amp; water fine?",
            "ts": "1600000000.000100",
            "channel": "C1",
            "team": "T1",
            "blocks": [{"type": "rich_text", "block_id": SECRET}],
        },
    }


async def test_the_upgrade_from_the_first_schema_removes_tokens_from_stored_slack_events(
    tmp_path: Path, migrations: Path
) -> None:
    path = tmp_path / "nerve.db"
    job = '{"kind": "message", "text": "discord payloads carry no token and stay as they are"}'
    async with await SQLiteStore.open(path, migrations_dir=migrations):
        pass
    async with aiosqlite.connect(path) as db:
        await db.executemany(
            "INSERT INTO inbox (platform, event_id, payload, status) VALUES (?, ?, ?, ?)",
            [
                ("slack", "Ev0", json.dumps(slack_body("Ev0")), "done"),
                ("slack", "Ev1", json.dumps(slack_body("Ev1")), "received"),
                ("slack", "Ev2", "not json " + SECRET, "received"),
                ("discord", "m:1", job, "received"),
            ],
        )
        await db.commit()
    assert SECRET.encode() in database_bytes(tmp_path)

    async with await SQLiteStore.open(path) as store:
        unfinished = dict(await store.unfinished_events("slack"))
        assert await store.unfinished_events("discord") == [("m:1", job)]
        assert await store.claim_event("slack", "Ev0", "{}") is False

    assert SECRET.encode() not in database_bytes(tmp_path)
    assert await rows(path, "SELECT event_id, payload FROM inbox WHERE status = 'done'") == [("Ev0", "{}")]
    assert unfinished["Ev2"] == "{}"
    # What is left still makes the same turn at start-up as the whole body did.
    me = Identity(user_id="UBOT")
    rules: dict[str, Any] = {"allow_bots": True, "follow_threads": True, "followed": lambda _key: True}
    before = classify(slack_body("Ev1"), me, **rules)
    assert before is not None and before.incoming.text == "is the air & water fine?"
    assert classify(json.loads(unfinished["Ev1"]), me, **rules) == before


def database_bytes(folder: Path) -> bytes:
    """Every byte SQLite keeps for the database: the file, its WAL and shared memory."""
    return b"".join(path.read_bytes() for path in sorted(folder.glob("nerve.db*")))

"""Shared files in the store, on SQLite and on PostgreSQL: kept with their conversation, found only
there, gone with it (deleted, pruned, forgotten), named in the person's export; and a model's
refusal of images remembered."""

from __future__ import annotations

import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import aiosqlite
import pytest

from adapters.common.rights import forgotten_lines
from bot.errors import FileRefused
from bot.files.read import FileLimits, read_file
from bot.store.base import ConversationStore
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR
from bot.store.person_data import Forgotten
from bot.store.prune import prune_conversations
from bot.store.sqlite import SQLiteStore
from bot.types import Author, ChatMessage, ConversationKey, Person
from bot.types.files import StoredFile
from tests.stores import Backend
from tests.test_threads_store import backdate

pytestmark = pytest.mark.both_stores

ADA_DM = ConversationKey(platform="slack", workspace="T1", channel="D1", thread="1.0")
BOB_DM = ConversationKey(platform="slack", workspace="T1", channel="D2", thread="1.0")
SHARED = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="2.0")
ADA = Person(id="slack:T1:U1", platform="slack", workspace="T1", user_id="U1")
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def a_file(file_id: str, text: str = "a,b\n1,2\n", *, kind: str = "text") -> StoredFile:
    if kind == "image":
        return StoredFile(
            id=file_id,
            name="shot.png",
            kind="image",
            mime="image/png",
            size=2048,
            summary="10×10 PNG image",
            image=b"\x89PNG scaled",
            image_mime="image/png",
        )
    return StoredFile(id=file_id, name="data.csv", kind="text", mime="text/csv", size=len(text), text=text)


async def share(
    store: ConversationStore, key: ConversationKey, file: StoredFile, author: Author | None = None
) -> None:
    message = ChatMessage(role="user", content=f"see [attached file {file.id}]", files=(file.id,))
    await store.append(key, [message], author=author)
    assert await store.keep_file(key, file, author=author.person if author else None)


async def test_a_file_is_kept_with_its_message_and_found_only_in_its_own_conversation(
    store: ConversationStore,
) -> None:
    await share(store, ADA_DM, a_file("f_ada", "CANARY-ADA"))
    await share(store, ADA_DM, a_file("f_img", kind="image"))

    (message, _) = await store.history(ADA_DM)
    assert message.files == ("f_ada",)
    assert [f.id for f in await store.files_of(ADA_DM)] == ["f_ada", "f_img"]
    assert await store.file_in(ADA_DM, "f_ada") == a_file("f_ada", "CANARY-ADA")
    assert await store.file_in(ADA_DM, "f_img") == a_file("f_img", kind="image")
    # Another conversation does not find it, whoever names it.
    assert await store.file_in(BOB_DM, "f_ada") is None
    assert await store.files_of(BOB_DM) == []
    # Kept once: a message delivered again reads under the same ids.
    assert await store.keep_file(ADA_DM, a_file("f_ada", "other")) is False


async def test_a_reset_leaves_the_files_with_the_old_conversation(store: ConversationStore) -> None:
    await share(store, ADA_DM, a_file("f_ada"))
    await store.reset(ADA_DM)

    assert await store.file_in(ADA_DM, "f_ada") is None
    assert await store.files_of(ADA_DM) == []


async def test_deleting_or_pruning_a_conversation_deletes_its_files(
    store: ConversationStore, store_backend: Backend
) -> None:
    await share(store, ADA_DM, a_file("f_old", "CANARY-OLD"))
    await share(store, BOB_DM, a_file("f_bob", "CANARY-BOB"))
    await backdate(store_backend, ADA_DM, days=40)
    assert await prune_conversations(store, older_than_days=30, now=NOW) == 1
    assert await store_backend.rows("SELECT id FROM files") == [("f_bob",)]

    (bob,) = [c for c in await store.stored_conversations("slack") if c.key == BOB_DM]
    assert await store.delete_conversation(bob.id) == "deleted"
    assert await store_backend.rows("SELECT id FROM files") == []
    assert not any(b"CANARY" in value for value in await store_backend.everything_stored())


async def test_forgetting_a_person_deletes_their_files_everywhere_and_keeps_others(
    store: ConversationStore, store_backend: Backend
) -> None:
    ada = Author(person=ADA.id, user_id="U1", private=True)
    await share(store, ADA_DM, a_file("f_dm", "CANARY-DM"), ada)
    in_channel = Author(person=ADA.id, user_id="U1", private=False)
    await share(store, SHARED, a_file("f_chan", "CANARY-CHANNEL"), in_channel)
    bob = Author(person="slack:T1:U2", user_id="U2", private=False)
    await share(store, SHARED, a_file("f_bob", "bob's"), bob)

    exported = await store.export_person(ADA)
    assert {(f["id"], f["name"], f["size"]) for f in exported["files"]} == {
        ("f_dm", "data.csv", 9),
        ("f_chan", "data.csv", 14),
    }
    assert "text" not in exported["files"][0]
    (dm,) = exported["private_conversations"]
    assert dm["messages"][0]["files"] == ["f_dm"]
    assert "images" not in dm["messages"][0]

    found = await store.forget_person(ADA)

    assert found.files == 2
    assert "2 shared files deleted" in forgotten_lines(found)
    assert await store_backend.rows("SELECT id FROM files") == [("f_bob",)]
    shared = await store.history(SHARED)
    assert shared[0].files == () and shared[1].files == ("f_bob",)
    assert not any(b"CANARY" in value for value in await store_backend.everything_stored())


async def test_a_models_refusal_of_images_is_remembered_by_another_store_on_the_database(
    store: ConversationStore, store_backend: Backend
) -> None:
    assert await store.refuses_images("text-only") is False
    await store.set_refuses_images("text-only")
    await store.set_refuses_images("text-only")

    again = await store_backend.open()
    try:
        assert await again.refuses_images("text-only") is True
        assert await again.refuses_images("sees") is False
    finally:
        await again.close()


async def test_messages_stored_before_files_existed_read_back_without_files(tmp_path: Path) -> None:
    older = tmp_path / "migrations"
    shutil.copytree(DEFAULT_MIGRATIONS_DIR, older, ignore=shutil.ignore_patterns("postgres", "0018_*"))
    path = tmp_path / "upgraded.db"
    said = ChatMessage(role="user", content="before files")
    async with await SQLiteStore.open(path, migrations_dir=older):
        pass
    # Written as the previous schema had it (the ledgers now write the files column too).
    async with aiosqlite.connect(path) as db:
        await db.execute(
            "INSERT INTO conversations (id, platform, workspace, channel, thread) VALUES (1, ?, ?, ?, ?)",
            (ADA_DM.platform, ADA_DM.workspace, ADA_DM.channel, ADA_DM.thread),
        )
        await db.execute(
            "INSERT INTO messages (conversation_id, seq, role, content) VALUES (1, 1, 'user', ?)",
            (said.content,),
        )
        await db.commit()
    async with await SQLiteStore.open(path) as store:
        assert await store.history(ADA_DM) == [said]
        await share(store, ADA_DM, a_file("f_new"))
        assert [m.files for m in await store.history(ADA_DM)] == [(), ("f_new",)]


def test_every_count_of_a_forgetting_has_its_words() -> None:
    every = Forgotten(**dict.fromkeys(Forgotten().counts(), 1))

    assert len(forgotten_lines(every)) == len(every.counts())


async def test_a_text_with_nul_characters_is_kept_without_them_on_either_database(
    store: ConversationStore,
) -> None:
    # A log may carry a stray NUL and still read as text; PostgreSQL's text columns refuse NUL.
    log = b"boot ok\n" * 200 + b"\x00 line two\nend\n"
    read = await read_file("f_log", "app\x00.log", "text/plain", log)

    await share(store, ADA_DM, read)

    kept = await store.file_in(ADA_DM, "f_log")
    assert kept is not None and "\x00" not in kept.text + kept.name + kept.summary
    assert "line two" in kept.text


async def test_a_file_whose_reading_outlasts_its_time_is_refused_and_the_turn_goes_on() -> None:
    # A thread of its own that never ends while the test holds it: reading cannot finish in time.
    blocked = threading.Event()

    def slow(*_: object) -> StoredFile:
        blocked.wait(10)
        raise AssertionError("the read was waited for past its time")

    limits = FileLimits(read_seconds=0.2)
    with (
        mock.patch("bot.files.read.read_file_sync", slow),
        pytest.raises(FileRefused, match=r"notes\.txt: reading it took longer than 0\.2 s"),
    ):
        await read_file("f_slow", "notes.txt", "text/plain", b"hello\n", limits=limits)
    blocked.set()

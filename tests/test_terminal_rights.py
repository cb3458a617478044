"""A person's data rights in the terminal chat: `/export FILE` writes their data as JSON readable by
them only (nothing of another login's); `/forget-me` asks first (no keeps everything), then deletes
their data alone and says what went, in counts.

nerve runs as a person runs it (a pseudo-terminal) on its own SQLite database, with the local fake
model service.
"""

from __future__ import annotations

import json
from pathlib import Path

from adapters.common.rights import AUDIT_KEPT, NOTHING_DELETED
from adapters.settings import PLATFORMS
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Person
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.test_terminal import PROMPT, chat_env, nerve, terminal
from tests.test_terminal_memory import keep, stored


async def exported(db: Path, login: str) -> str:
    store = await SQLiteStore.open(db)
    try:
        key = ConversationKey(platform="terminal", workspace=login, channel="cli", thread="t")
        return json.dumps(await store.export_person(Person.of(key, login, PLATFORMS)))
    finally:
        await store.close()


async def said(tmp_path: Path, model: FakeLLMServer, login: str, text: str) -> None:
    env = chat_env(tmp_path, servers={}, USER=login, LOGNAME=login, OPENAI_BASE_URL=model.base_url)
    async with terminal(*nerve("chat"), env=env | {"OPENAI_API_KEY": "test"}) as term:
        at = await term.expect(PROMPT)
        term.type(f"{text}\r".encode())
        at = await term.expect(b"noted", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0


async def test_export_then_forget_me_after_a_yes_only_my_data(tmp_path: Path) -> None:
    db = tmp_path / "nerve.db"
    await keep(db, "alice likes canaryalice1", "alice")
    await keep(db, "bob likes canarybob1", "bob")
    async with FakeLLMServer([reply("noted"), reply("noted")]) as model:
        await said(tmp_path, model, "bob", "my code is canarybob2")
        await said(tmp_path, model, "alice", "my code is canaryalice2")

    target = tmp_path / "mine.json"
    env = chat_env(tmp_path, servers={}, USER="alice", LOGNAME="alice")
    async with terminal(*nerve("chat"), env=env) as term:
        at = await term.expect(PROMPT)
        term.type(f"/export {target}\r".encode())
        at = await term.expect(b"readable by you only", after=at)
        document = json.loads(target.read_text(encoding="utf-8"))
        assert target.stat().st_mode & 0o077 == 0
        assert [m["text"] for m in document["memories"]] == ["alice likes canaryalice1"]
        assert "canaryalice2" in json.dumps(document) and "canarybob" not in json.dumps(document)

        term.type(b"/forget-me\r")
        at = await term.expect(b"cannot be undone", after=at)
        term.type(b"n\r")
        at = await term.expect(NOTHING_DELETED.encode(), after=at)
        assert [m.text for m in await stored(db, "alice")] == ["alice likes canaryalice1"]

        term.type(b"/forget-me\r")
        at = await term.expect(b"cannot be undone", after=at)
        term.type(b"y\r")
        at = await term.expect(b"1 memory about you deleted", after=at)
        at = await term.expect(AUDIT_KEPT.encode()[:30], after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert b"private conversation deleted" in term.output
    assert await stored(db, "alice") == []
    assert "canaryalice" not in await exported(db, "alice")
    bobs = await exported(db, "bob")
    assert "canarybob1" in bobs and "canarybob2" in bobs, "the other login's memory and messages stay"

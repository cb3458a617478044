"""The terminal is one place, written `terminal` wherever a place is shown or taken: what `nerve
approvals` lists is what `nerve approvals revoke` and `nerve tools --place` accept, and approvals
remembered under the old spelling `terminal:cli` are carried over when the store opens."""

from __future__ import annotations

import shutil
from pathlib import Path

import aiosqlite

from adapters.settings import PLATFORMS
from bot.policy.scopes import Place, place_id
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR, discover, migrate
from bot.store.sqlite import SQLiteStore

OLD = "terminal:cli"


def test_the_terminals_place_is_written_as_the_place_option_reads_it() -> None:
    where = Place(platform="terminal", channel="cli", user="ada")  # as the terminal builds it
    written = place_id(where)
    assert written == "terminal"
    assert Place.parse(written, PLATFORMS) == Place(platform="terminal")
    assert place_id(Place(platform="slack", channel="C123", user="U1")) == "slack:C123"


async def test_approvals_remembered_as_terminal_cli_are_listed_and_revoked_as_terminal(
    tmp_path: Path,
) -> None:
    # A store as the last release left it: every migration before the one that renames the place.
    before = tmp_path / "migrations"
    before.mkdir()
    for migration in (m for m in discover(DEFAULT_MIGRATIONS_DIR) if m.version < 12):
        shutil.copy(DEFAULT_MIGRATIONS_DIR / f"{migration.version:04d}_{migration.name}.sql", before)
    path = tmp_path / "nerve.db"
    async with aiosqlite.connect(path) as db:
        await migrate(db, before)
        await db.execute(
            "INSERT INTO remembered_approvals (place, server, tool, definition_hash, granted_by)"
            " VALUES (?, 'notes', 'append_note', 'h1', 'ada')",
            (OLD,),
        )
        await db.commit()

    store = await SQLiteStore.open(path)
    try:
        [remembered] = await store.remembered_approvals()
        assert remembered.place == "terminal"
        assert Place.parse(remembered.place, PLATFORMS) == Place(platform="terminal")
        where = Place(platform="terminal", channel="cli", user="ada")
        assert await store.remembered(place_id(where), "notes", "append_note") == "h1"
        assert await store.revoke("terminal", "notes", "append_note")
        assert await store.remembered_approvals() == []
    finally:
        await store.close()

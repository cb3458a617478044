"""`nerve memory` through the real command line, on SQLite and on PostgreSQL: a person's, a place's
or every memory, newest first, as a table or JSON; `nerve memory forget`. It needs the store alone:
the servers file it is given cannot even be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.store.base import ConversationStore
from bot.types import Memory
from tests.stores import Backend
from tests.test_cli import nerve_env, run_nerve

pytestmark = pytest.mark.both_stores

ALICE, BOB = "slack:T1:U1ALICE", "slack:T1:U2BOB"
GENERAL, GUILD = "slack:CGENERAL", "discord:guild:G1"


def env_for(tmp_path: Path, backend: Backend) -> dict[str, str]:
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    env = nerve_env(tmp_path, servers={}, NERVE_MCP_CONFIG=str(broken))
    if backend.name == "postgres":
        env["NERVE_DATABASE_URL"] = backend.location
    return env


async def saved(store: ConversationStore, kind: str, subject: str, text: str, **more: object) -> Memory:
    values: dict[str, object] = {"anywhere": False, "written_by": ALICE, "written_in": "slack:DU1ALICE"}
    values.update(more)
    return await store.add_memory(kind=kind, subject=subject, text=text, **values)  # type: ignore[arg-type]


async def test_memory_lists_a_persons_a_places_or_every_memory_newest_first(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with await store_backend.open() as store:
        tea = await saved(store, "person", ALICE, "I like tea")
        team = await saved(store, "person", ALICE, "my team is Falcon", anywhere=True)
        lunch = await saved(store, "place", GENERAL, "lunch is at noon", written_in=GENERAL)
        bobs = await saved(store, "person", BOB, "I like coffee", written_by=BOB, written_in="slack:DU2BOB")
        raid = await saved(store, "place", GUILD, "raids on Friday", written_by="discord:7", written_in=GUILD)
    env = env_for(tmp_path, store_backend)

    code, out, err = await run_nerve("memory", "--user", ALICE, "--json", env=env)
    assert code == 0, err
    listed = json.loads(out)
    assert [m["id"] for m in listed["memories"]] == [team.id, tea.id] and listed["more"] is False
    assert listed["memories"][0] == {
        "id": team.id,
        "kind": "person",
        "about": ALICE,
        "text": "my team is Falcon",
        "anywhere": True,
        "saved": team.created_at,
        "written_by": ALICE,
        "written_in": "slack:DU1ALICE",
    }

    code, out, err = await run_nerve("memory", "--place", "slack:CGENERAL", "--json", env=env)
    assert code == 0, err
    assert [m["id"] for m in json.loads(out)["memories"]] == [lunch.id]
    # A channel of a Discord server: the server's memories.
    code, out, err = await run_nerve("memory", "--place", "discord:guild:G1:C5", "--json", env=env)
    assert [m["id"] for m in json.loads(out)["memories"]] == [raid.id]
    code, out, err = await run_nerve(
        "memory", "--user", ALICE, "--place", "slack:CGENERAL", "--json", env=env
    )
    assert [m["id"] for m in json.loads(out)["memories"]] == [lunch.id, team.id, tea.id]

    code, out, err = await run_nerve("memory", env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:5]] == [raid.id, bobs.id, lunch.id, team.id, tea.id]
    assert lines[3].split()[1:4] == ["person", ALICE, "anywhere"]
    assert "DMs only" in lines[4] and lines[4].endswith("I like tea") and f"by {ALICE}" in lines[4]
    assert "its place" in lines[2] and lines[2].endswith("lunch is at noon")
    assert lines[-1] == "Forget one with: nerve memory forget ID"


async def test_memory_with_nothing_saved_says_so_and_a_bad_place_is_a_usage_error(
    tmp_path: Path, store_backend: Backend
) -> None:
    env = env_for(tmp_path, store_backend)

    code, out, err = await run_nerve("memory", "--user", BOB, env=env)
    assert (code, out) == (0, f"No memories of {BOB}.\n"), err
    code, out, err = await run_nerve("memory", "--json", env=env)
    assert json.loads(out) == {"memories": [], "more": False}
    code, out, err = await run_nerve("memory", "--place", "#general", env=env)
    assert code == 2 and out == ""
    assert "--place" in err and "must start with one of" in err


async def test_memory_forget_removes_any_memory_by_its_id_and_says_what_it_was(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with await store_backend.open() as store:
        tea = await saved(store, "person", ALICE, "I like tea")
        lunch = await saved(store, "place", GENERAL, "lunch is at noon", written_in=GENERAL)
    env = env_for(tmp_path, store_backend)

    code, out, err = await run_nerve("memory", "forget", tea.id, env=env)
    assert (code, out) == (0, f"Forgot {tea.id} (person {ALICE}): I like tea\n"), err
    code, out, err = await run_nerve("memory", "forget", tea.id, env=env)
    assert code == 1 and out == ""
    assert f"no memory with id {tea.id!r}" in err

    async with await store_backend.open() as store:
        assert [m.id for m in await store.memories_of()] == [lunch.id]

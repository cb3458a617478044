"""`nerve ask`, `nerve threads`, `nerve history` and `nerve delete` through the real command line,
with the offline model and the shipped servers (the env-query one alone where only it is asked)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest

from adapters import cli
from adapters.terminal.views import conversation_key
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage
from tests.test_cli import nerve_env, run_nerve, shipped_servers

QUESTION = "How is the air in A1001?"
# The question calls this server alone: the others would only start and stop with each command.
ENV_QUERY = shipped_servers("env-query")
NAMED = re.compile(r"nerve: conversation (ask-\S+) \(continue it with --thread \1\)")


def db_rows(tmp_path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(tmp_path / "nerve.db") as db:
        return list(db.execute(sql))


async def test_ask_without_a_thread_starts_a_fresh_conversation_and_names_it(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, out, err = await run_nerve("ask", QUESTION, env=env)
    assert code == 0, err
    found = NAMED.search(err)
    assert found is not None, err
    names = [found.group(1)]
    code, out, err = await run_nerve("ask", "--json", QUESTION, env=env)
    assert code == 0, err
    assert NAMED.search(err) is None, "--json names it in the JSON, stderr stays quiet"
    names.append(json.loads(out)["thread"])
    assert names[0] != names[1], "two script runs never share a conversation"

    code, _, err = await run_nerve("ask", "--thread", names[0], "And in A1002?", env=env)
    assert code == 0, err
    assert NAMED.search(err) is None, "continuing names no new conversation"
    code, out, err = await run_nerve("history", "--thread", names[0], env=env)
    assert code == 0, err
    assert f"you: {QUESTION}" in out and "you: And in A1002?" in out
    code, out, err = await run_nerve("history", "--thread", names[1], env=env)
    assert "And in A1002?" not in out

    code, out, err = await run_nerve("threads", "--json", env=env)
    assert code == 0, err
    listed = json.loads(out)
    assert [t["thread"] for t in listed] == [names[0], names[1]], "the last active first"
    assert listed[0]["message_count"] > listed[1]["message_count"]
    assert "default" not in out, "a one-shot question no longer lands in the chat's default conversation"


async def test_ask_dash_reads_the_question_from_stdin(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, out, err = await run_nerve("ask", "-", "--thread", "piped", env=env, stdin=QUESTION + "\n")
    assert code == 0, err
    assert "AQI" in out
    code, out, err = await run_nerve("history", "--thread", "piped", env=env)
    assert f"you: {QUESTION}" in out and "you: -" not in out

    code, out, err = await run_nerve("ask", "-", env=env, stdin="  \n")
    assert code == 2 and out == ""
    assert "nothing to ask" in err


async def test_history_of_an_unknown_thread_says_so_and_fails(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, _, err = await run_nerve("ask", "--thread", "walks", QUESTION, env=env)
    assert code == 0, err
    code, out, err = await run_nerve("history", "--thread", "wakls", env=env)
    assert (code, out) == (1, "")
    assert "no conversation named 'wakls'" in err and "nerve threads" in err


async def test_history_prints_each_message_with_its_time_and_as_json(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, _, err = await run_nerve("ask", "--thread", "walks", QUESTION, env=env)
    assert code == 0, err
    code, out, err = await run_nerve("history", "--thread", "walks", env=env)
    assert code == 0, err
    assert re.search(rf"^\[\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\] you: {re.escape(QUESTION)}$", out, re.M), (
        out
    )
    assert re.search(r"^\[[^]]+\] nerve → get_environment_status", out, re.M), out

    code, out, err = await run_nerve("history", "--thread", "walks", "--json", env=env)
    assert code == 0, err
    body = json.loads(out)
    (conversation,) = body["conversations"]
    assert body["thread"] == "walks" and conversation["archived_at"] is None
    first = conversation["messages"][0]
    assert (first["role"], first["content"]) == ("user", QUESTION)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["at"])
    assert any(m["tool_calls"] for m in conversation["messages"])


async def test_a_reset_conversation_is_listed_and_shown_on_request(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, _, err = await run_nerve("chat", "--thread", "walks", env=env, stdin=f"{QUESTION}\n/reset\n")
    assert code == 0, err

    code, out, err = await run_nerve("threads", env=env)
    assert code == 0, err
    assert "walks" not in out and "nerve threads --all" in out
    code, out, err = await run_nerve("threads", "--all", env=env)
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("walks")]
    assert "archived" in line
    conversation_id = re.search(r"id (\d+)", line).group(1)

    code, out, err = await run_nerve("history", "--thread", "walks", env=env)
    assert code == 0, err
    assert "reset" in out and "--archived" in out and QUESTION not in out
    code, out, err = await run_nerve("history", "--thread", "walks", "--archived", env=env)
    assert code == 0, err
    assert f"conversation {conversation_id}, archived" in out and f"you: {QUESTION}" in out
    code, out, err = await run_nerve("history", "--id", conversation_id, "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["conversations"][0]["messages"][0]["content"] == QUESTION
    code, out, err = await run_nerve("history", "--id", "999", env=env)
    assert code == 1 and "no conversation with id 999" in err


async def test_delete_asks_for_yes_off_a_terminal_then_removes_every_conversation_of_the_thread(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY)
    code, _, err = await run_nerve(
        "chat", "--thread", "walks", env=env, stdin=f"{QUESTION}\n/reset\n{QUESTION}\n"
    )
    assert code == 0, err
    code, _, err = await run_nerve("ask", "--thread", "kept", QUESTION, env=env)
    assert code == 0, err
    before = db_rows(tmp_path, "SELECT COUNT(*) FROM messages")[0][0]

    code, out, err = await run_nerve("delete", "--thread", "walks", env=env)
    assert (code, out) == (2, "")
    assert "--yes" in err
    assert db_rows(tmp_path, "SELECT COUNT(*) FROM messages")[0][0] == before

    code, out, err = await run_nerve("delete", "--thread", "walks", "--yes", env=env)
    assert code == 0, err
    assert "Deleted the 2 conversations of thread 'walks'" in out
    code, _, err = await run_nerve("history", "--thread", "walks", "--archived", env=env)
    assert code == 1 and "no conversation named 'walks'" in err
    code, out, err = await run_nerve("history", "--thread", "kept", env=env)
    assert code == 0 and f"you: {QUESTION}" in out
    assert db_rows(
        tmp_path,
        "SELECT COUNT(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " WHERE c.thread = 'walks'",
    ) == [(0,)]
    code, _, err = await run_nerve("delete", "--thread", "walks", "--yes", env=env)
    assert code == 1 and "nerve threads" in err

    # The thread name can be used again: it starts a fresh conversation.
    with_geo = nerve_env(tmp_path)  # the shipped servers: this question gives coordinates
    code, _, err = await run_nerve("ask", "--thread", "walks", "Geolocation for 31.23, 121.47?", env=with_geo)
    assert code == 0, err
    code, out, _ = await run_nerve("history", "--thread", "walks", env=env)
    assert QUESTION not in out and "31.23" in out


async def test_delete_waits_for_the_turn_running_in_that_conversation(tmp_path, monkeypatch, capsys):
    """The deletion queues behind the running turn (its lock), so no turn writes into a conversation
    being deleted; the turn's messages go with it."""
    for name, value in nerve_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    key = conversation_key("busy")
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        await store.append(key, [ChatMessage(role="user", content="a question")])
        async with store.turn_lock.hold(key):  # a turn of this conversation runs
            deleting = asyncio.create_task(
                asyncio.to_thread(cli.main, ["delete", "--thread", "busy", "--yes"])
            )
            said = ""
            for _ in range(3000):  # it says it waits for the turn
                said += capsys.readouterr().err
                if "waiting for the turn running in this conversation" in said:
                    break
                await asyncio.sleep(0.01)
            else:
                pytest.fail(f"the deletion never said it waits for the running turn: {said!r}")
            await store.append(key, [ChatMessage(role="assistant", content="the answer")])
            assert not deleting.done()
        assert await asyncio.wait_for(deleting, 60) == 0
        assert await store.history(key) == []
        assert "Deleted conversation 'busy'" in capsys.readouterr().out
    finally:
        await store.close()


async def test_retention_deletes_old_conversations_when_nerve_starts(tmp_path):
    env = nerve_env(tmp_path, servers=ENV_QUERY, NERVE_RETENTION_DAYS="30")
    for thread in ("old", "recent"):
        code, _, err = await run_nerve("ask", "--thread", thread, QUESTION, env=env)
        assert code == 0, err
    with sqlite3.connect(tmp_path / "nerve.db") as db:
        db.execute(
            "UPDATE messages SET created_at = '2020-01-01T00:00:00.000Z'"
            " WHERE conversation_id = (SELECT id FROM conversations WHERE thread = 'old')"
        )
        db.execute("UPDATE conversations SET created_at = '2020-01-01T00:00:00.000Z' WHERE thread = 'old'")

    code, _, err = await run_nerve("ask", "--thread", "next", QUESTION, env=env)
    assert code == 0, err

    code, out, err = await run_nerve("threads", "--all", env=env)
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["next", "recent"]
    assert db_rows(
        tmp_path, "SELECT COUNT(*) FROM conversations WHERE thread = 'old' AND deleted_at IS NOT NULL"
    ) == [(1,)]

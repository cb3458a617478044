"""Sign-in from the terminal chat: `nerve chat` as a real process, the notes server (its own
authorization server) as another, the fake model service, and a BROWSER program that signs in on the
notes page and follows the redirect back to the chat's loopback callback.

Also `/connections` and `/disconnect` in the chat, `nerve connections` outside it, `nerve secret-key`.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.mcp.auth.vault import Vault
from tests.fakes.llm_server import FakeCall, FakeLLMServer, tool_reply
from tests.test_cli import run_nerve
from tests.test_notes_oauth_server import RunningServer, per_person_servers_file, start_server, stop_server
from tests.test_slack_sign_in import Model, who_the_tool_said, whoami
from tests.test_terminal import chat_env

USER = "ada"


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[RunningServer]:
    server = await start_server(tmp_path, "--port", "0")
    try:
        yield server
    finally:
        await stop_server(server)


def env_for(tmp_path: Path, notes: RunningServer, model: FakeLLMServer | None, person: str) -> dict[str, str]:
    """The notes server signed in to per person, a BROWSER that signs in as `person`, and the fake
    model service (None: no model service, so the offline model answers)."""
    config = per_person_servers_file(tmp_path, notes.mcp_url)
    return chat_env(
        tmp_path,
        NERVE_MCP_CONFIG=str(config),
        NERVE_SECRET_KEY="a-test-secret-key-long-enough",
        **({"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "test"} if model is not None else {}),
        USER=USER,
        LOGNAME=USER,
        BROWSER=f"{sys.executable} -m tests.sign_in_browser {person} %s",
        NERVE_SIGN_IN_TIMEOUT="60",
    )


async def test_the_chat_opens_the_link_takes_the_browser_back_and_goes_on_as_the_person(tmp_path, notes):
    model = Model([tool_reply(FakeCall(name="connect_notes")), whoami(), who_the_tool_said])
    async with FakeLLMServer(model) as llm:
        env = env_for(tmp_path, notes, llm, "alice")
        code, out, err = await run_nerve("chat", env=env, stdin="who am I at notes?\n/connections\n/quit\n")
        assert code == 0, err
        assert "notes works with your own account. Sign in in your browser" in out
        assert "http://127.0.0.1:" in out and "/authorize?" in out, "the link is printed"
        assert "Connected to notes." in out
        assert "You are signed in to notes as alice." in out
        assert "Connect button" not in out, "no button to speak of in a terminal"
        assert "notes — connected since" in out
        assert notes.log_lines().count("call whoami by alice") == 1
        assert model.moves == []

        code, out, err = await run_nerve("connections", env=env)
        assert code == 0, err
        assert "notes — connected since" in out

        # Only the database: no servers file and no NERVE_SECRET_KEY, the same connection listed.
        only_db = {k: v for k, v in env.items() if k != "NERVE_SECRET_KEY"}
        only_db["NERVE_MCP_CONFIG"] = str(tmp_path / "no-such-servers.json")
        code, out, err = await run_nerve("connections", env=only_db)
        assert code == 0, err
        assert "notes — connected since" in out

        code, out, err = await run_nerve("chat", env=env, stdin="/disconnect notes\n/connections\n/quit\n")
        assert code == 0, err
        assert "Disconnected from notes" in out
        assert "No connections" in out

        code, out, err = await run_nerve("connections", env=env)
        assert code == 0, err
        assert "No connections" in out and "Not connected: notes" in out


async def test_nerve_secret_key_prints_a_new_key_each_time_that_nerve_accepts():
    env = {"PATH": "/usr/bin:/bin"}
    first = await run_nerve("secret-key", env=env)
    second = await run_nerve("secret-key", env=env)
    assert first[0] == 0 and second[0] == 0
    key = first[1].strip()
    assert key != second[1].strip()
    assert Vault(key).open(Vault(key).seal({"ok": True})) == {"ok": True}


async def test_a_question_left_waiting_for_a_sign_in_asks_again_when_the_chat_starts_again(tmp_path, notes):
    model = Model([tool_reply(FakeCall(name="connect_notes")), whoami(), who_the_tool_said])
    async with FakeLLMServer(model) as llm:
        # First the person does not sign in: the browser opens nothing, and the link runs out.
        env = {**env_for(tmp_path, notes, llm, "alice"), "BROWSER": "true %s", "NERVE_SIGN_IN_TIMEOUT": "2"}
        code, out, err = await run_nerve("chat", env=env, stdin="who am I at notes?\n/quit\n")
        assert code == 0, err
        assert "Not signed in to notes in time" in out
        assert notes.log_lines() == []

        # The next chat asks again, with a new link (the old one came back to a port now closed).
        code, out, err = await run_nerve("chat", env=env_for(tmp_path, notes, llm, "alice"), stdin="/quit\n")
        assert code == 0, err
        assert "Your last question in this thread waits for a sign-in to notes." in out
        assert "Connected to notes." in out
        assert "You are signed in to notes as alice." in out
        assert notes.log_lines().count("call whoami by alice") == 1
        assert model.moves == []

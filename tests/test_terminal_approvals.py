"""Approvals in the terminal: the per-call prompt of `nerve chat` and `nerve ask`, "always here",
`nerve approvals`, and the audit in `nerve history`.

nerve runs as a person runs it (a pseudo-terminal, or pipes for scripts) against the approvals test
server (tests/mcp_servers/trust.py) and the local fake model service.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.store.sqlite import SQLiteStore
from bot.text.turn_note import split_note
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.test_cli import run_nerve
from tests.test_terminal import PROMPT, chat_env, nerve, terminal

USER = "alice"
ALWAYS = b"[y]es / [n]o / [a]lways here"


def asked(call: str) -> bytes:
    return f"Run {call}? ".encode() + ALWAYS


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


def env_for(tmp_path: Path, notes: Path, model: FakeLLMServer | None = None, **extra: str) -> dict[str, str]:
    config = tmp_path / "mcp.json"
    trust = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.trust", str(notes)],
        "cwd": str(ROOT),
    }
    config.write_text(json.dumps({"mcpServers": {"notes": trust}}))
    model_settings = {} if model is None else {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "test"}
    return chat_env(
        tmp_path, NERVE_MCP_CONFIG=str(config), USER=USER, LOGNAME=USER, **model_settings, **extra
    )


def append(text: str, call_id: str) -> FakeCall:
    return FakeCall(name="append_note", arguments=json.dumps({"text": text}), id=call_id)


def tool_content(request: dict[str, Any], call_id: str) -> str:
    """A tool message as its tool wrote it (the turn's note may end the request's last message)."""
    content = str(next(m for m in request["messages"] if m.get("tool_call_id") == call_id)["content"])
    return split_note(content)[0]


# --- the chat's prompt ----------------------------------------------------------------------------


async def test_ctrl_c_at_the_approval_prompt_denies_the_calls_not_yet_decided_and_the_chat_goes_on(
    tmp_path, notes
):
    script = [
        tool_reply(append("one", "call_a"), FakeCall(name="delete_note", id="call_d"), content="Tidying up."),
        reply("Appended; the note was not deleted."),
    ]
    async with FakeLLMServer(script) as model:
        async with terminal(*nerve("chat"), env=env_for(tmp_path, notes, model)) as term:
            at = await term.expect(PROMPT)
            term.type(b"append one, then delete the note\r")
            at = await term.expect(asked('append_note(text="one")'), after=at)
            term.type(b"maybe\r")  # not an answer: asked again
            at = await term.expect(b"Answer y", after=at)
            at = await term.expect(asked('append_note(text="one")'), after=at)
            term.type(b"y\r")
            at = await term.expect(asked("delete_note()"), after=at)
            term.type(b"\x03")
            at = await term.expect(b"Not run: delete_note", after=at)
            at = await term.expect(b"Appended; the note was not deleted.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert notes.read_text() == "one\n"
    assert "denied" in tool_content(model.requests[1], "call_d")
    assert "Traceback" not in term.screen()


async def test_always_here_is_remembered_until_it_is_revoked(tmp_path, notes):
    script = [
        tool_reply(append("one", "call_1")),
        reply("Appended one."),
        tool_reply(append("two", "call_2")),
        reply("Appended two."),
        tool_reply(append("three", "call_3")),
        reply("Not appended."),
    ]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, notes, model)
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"append one\r")
            at = await term.expect(asked('append_note(text="one")'), after=at)
            term.type(b"a\r")
            at = await term.expect(b"Appended one.", after=at)
            at = await term.expect(PROMPT, after=at)
            term.type(b"append two\r")  # remembered here: runs without asking
            at = await term.expect(b"Appended two.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert asked('append_note(text="two")') not in term.output  # the prompt may be drawn twice
        assert notes.read_text() == "one\ntwo\n"

        code, out, err = await run_nerve("approvals", env=env)
        assert code == 0, err
        [line] = [line for line in out.splitlines() if "append_note" in line]
        assert line.split()[0] == "terminal" and "notes" in line and f"granted by {USER}" in line

        code, out, err = await run_nerve("approvals", "revoke", "terminal", "notes", "append_note", env=env)
        assert code == 0, err
        assert "Revoked" in out

        code, out, err = await run_nerve("ask", "append three", env=env)  # asks again: denied here
        assert code == 0, err
        assert "not run: append_note needs approval; run with --yes to approve" in err
        model.assert_complete()
    assert notes.read_text() == "one\ntwo\n"


async def test_ask_on_a_terminal_asks_like_the_chat(tmp_path, notes):
    script = [tool_reply(append("one", "call_1")), reply("Appended one.")]
    async with FakeLLMServer(script) as model:
        async with terminal(*nerve("ask", "append one"), env=env_for(tmp_path, notes, model)) as term:
            at = await term.expect(asked('append_note(text="one")'))
            term.type(b"y\r")
            await term.expect(b"Appended one.", after=at)
            assert await term.exit_code() == 0
        model.assert_complete()
    assert notes.read_text() == "one\n"


async def test_a_request_that_ran_out_of_time_asks_nothing_and_the_model_reads_not_approved_in_time(
    tmp_path, notes
):
    script = [tool_reply(append("one", "call_1")), reply("Nobody approved it in time.")]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, notes, model, NERVE_APPROVAL_TIMEOUT="0.001")
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"append one\r")
            at = await term.expect(b"expired", after=at)
            at = await term.expect(b"Nobody approved it in time.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert ALWAYS not in term.output
    assert "not approved in time" in tool_content(model.requests[1], "call_1")
    assert not notes.exists()


# --- scripts --------------------------------------------------------------------------------------


async def test_ask_json_says_for_each_call_what_was_decided_and_by_whom_and_why(tmp_path, notes):
    script = [
        tool_reply(FakeCall(name="read_note", id="call_r"), append("one", "call_a")),
        reply("I could only read the note."),
    ]
    async with FakeLLMServer(script) as model:
        code, out, err = await run_nerve(
            "ask", "--json", "read and append", env=env_for(tmp_path, notes, model)
        )
        model.assert_complete()
    assert code == 0, err
    answer = json.loads(out)  # stdout is the JSON alone; the refusal is on stderr
    assert "not run: append_note needs approval" in err
    calls = {c["name"]: c for c in answer["tool_calls"]}
    assert set(calls["read_note"]) >= {"name", "arguments", "is_error", "content"}
    assert calls["read_note"]["approval"] == "auto: read-only"
    # Nobody was there to ask: nerve denied it and says why, and the model is not told a person refused.
    denied = calls["append_note"]
    assert denied["decided_by"] == "nerve" and denied["decided_by"] != USER
    assert denied["approval"] == "denied: no one to ask (not on a terminal; use --yes)"
    assert denied["is_error"] is True
    told = tool_content(model.requests[1], "call_a")
    assert "nerve denied it: no one to ask (not on a terminal; use --yes)" in told, told
    assert "The user denied" not in told
    assert not notes.exists()


async def test_history_shows_who_decided_each_call_and_what_ran_without_asking(tmp_path, notes):
    script = [
        tool_reply(FakeCall(name="read_note", id="call_r"), append("one", "call_a")),
        reply("Read and appended."),
    ]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, notes, model)
        code, _, err = await run_nerve("ask", "--yes", "--thread", "audit", "read and append", env=env)
        assert code == 0, err
        model.assert_complete()
    code, out, err = await run_nerve("history", "--thread", "audit", env=env)
    assert code == 0, err
    lines = out.splitlines()
    # Each message after the time it was stored: `[2026-12-04 18:50:12 UTC] nerve → …`.
    read = next(i for i, line in enumerate(lines) if "UTC] nerve → read_note" in line)
    write = next(i for i, line in enumerate(lines) if "UTC] nerve → append_note" in line)
    assert lines[read + 1].strip().startswith("auto: read-only")
    assert lines[write + 1].strip().startswith(f"approved by {USER} at ")


# --- managing remembered approvals ----------------------------------------------------------------


async def test_approvals_lists_and_revokes_with_only_the_database(tmp_path, notes):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    env = chat_env(tmp_path, NERVE_MCP_CONFIG=str(broken))
    code, out, err = await run_nerve("approvals", env=env)
    assert code == 0, err
    assert "No remembered approvals" in out

    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        await store.remember("slack:C123", "files", "write_file", "hash", "U1")
    finally:
        await store.close()
    code, out, err = await run_nerve("approvals", env=env)
    assert code == 0, err
    assert "slack:C123" in out and "files" in out and "write_file" in out and "granted by U1" in out

    code, out, err = await run_nerve("approvals", "revoke", "slack:C123", "files", "delete_file", env=env)
    assert code == 1
    assert "no remembered approval for delete_file of server files in slack:C123" in err
    assert "Traceback" not in err
    code, out, err = await run_nerve("approvals", "revoke", "slack:C123", "files", "write_file", env=env)
    assert code == 0, err
    code, out, err = await run_nerve("approvals", env=env)
    assert "No remembered approvals" in out

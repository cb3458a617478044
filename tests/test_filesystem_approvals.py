"""Asking nerve to change a file, as a new user would, with the reference filesystem MCP server.

The server is `@modelcontextprotocol/server-filesystem` from npm, installed by `make test` into
`.node/` (never at run time). nerve runs for real: `nerve chat` on a pseudo-terminal or `nerve ask`
through pipes, with the real openai client talking to the local fake model service, which asks for
`write_file` on notes.txt. The approval prompt decides whether the file changes.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.test_cli import run_nerve
from tests.test_terminal import PROMPT, chat_env, nerve, terminal

SERVER = ROOT / ".node" / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
BEFORE = "shopping: milk\n"
AFTER = "shopping: milk, bread\n"
WRITE = {"path": "notes.txt", "content": AFTER}
REASON = "I'll add bread to your shopping list in notes.txt."
QUESTION = b"Add bread to the shopping list in notes.txt\r"
ASKED = b'Run write_file(path="notes.txt", \xe2\x80\xa6)? [y]es / [n]o / [a]lways here'
USER = "alice"


def reference_server() -> Path:
    """The installed reference server; missing means the Node packages were not installed."""
    if not SERVER.exists():
        pytest.fail(
            f"the reference filesystem server is not installed ({SERVER.relative_to(ROOT)} is missing): "
            "run `make test`, which installs it with npm from tests/node/package-lock.json"
        )
    return SERVER


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """The one directory the server may touch, holding notes.txt."""
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text(BEFORE)
    return root


def env_for(tmp_path: Path, files: Path, model: FakeLLMServer, **extra: str) -> dict[str, str]:
    config = tmp_path / "mcp.json"
    server = {"command": "node", "args": [str(reference_server()), str(files)], "trustAnnotations": True}
    config.write_text(json.dumps({"mcpServers": {"filesystem": server}}))
    # The terminal's person is the OS user: fix it, so the test can say who decided.
    return chat_env(
        tmp_path,
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="test",
        NERVE_MCP_CONFIG=str(config),
        USER=USER,
        LOGNAME=USER,
        **extra,
    )


def write_then(answer: str) -> list[Any]:
    return [
        tool_reply(FakeCall(name="write_file", arguments=json.dumps(WRITE), id="call_write"), content=REASON),
        reply(answer),
    ]


def tool_message(request: dict[str, Any], call_id: str) -> dict[str, Any]:
    return next(m for m in request["messages"] if m.get("tool_call_id") == call_id)


async def test_the_reference_server_says_which_of_its_tools_only_read():
    server = ServerConfig(
        command="node", args=[str(reference_server()), str(ROOT / "tests")], trustAnnotations=True
    )
    async with MCPHost({"filesystem": server}) as host:
        await host.wait_until_ready()
        assert host.problems() == []
        asks = {t.name: t.needs_approval for t in host.list_tools()}
    for name in ("write_file", "edit_file", "move_file", "create_directory"):
        assert asks[name] is True, name
    for name in ("read_text_file", "read_multiple_files", "list_directory", "search_files", "get_file_info"):
        assert asks[name] is False, name


async def test_denying_the_write_in_the_chat_leaves_the_file_untouched(tmp_path, files):
    async with FakeLLMServer(write_then("I left notes.txt as it was.")) as model:
        async with terminal(*nerve("chat", "--thread", "notes"), env=env_for(tmp_path, files, model)) as term:
            at = await term.expect(PROMPT)
            term.type(QUESTION)
            at = await term.expect(ASKED, after=at)
            shown = term.output[:at].decode("utf-8", "replace")
            # Above the question: the server, the tool, the arguments in full and the model's reason.
            assert "filesystem" in shown and REASON in shown
            assert '"content": "shopping: milk, bread\\n"' in shown
            term.type(b"n\r")
            at = await term.expect(b"I left notes.txt as it was.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert (files / "notes.txt").read_text() == BEFORE
    told = tool_message(model.requests[1], "call_write")["content"]
    assert "denied" in told
    assert "Traceback" not in term.screen()


async def test_approving_the_write_in_the_chat_changes_the_file(tmp_path, files):
    async with FakeLLMServer(write_then("Added bread.")) as model:
        async with terminal(*nerve("chat", "--thread", "notes"), env=env_for(tmp_path, files, model)) as term:
            at = await term.expect(PROMPT)
            term.type(QUESTION)
            at = await term.expect(ASKED, after=at)
            term.type(b"y\r")
            at = await term.expect(b"Added bread.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert (files / "notes.txt").read_text() == AFTER
    assert "denied" not in tool_message(model.requests[1], "call_write")["content"]


async def test_ask_without_a_terminal_denies_the_write_and_says_how_to_approve(tmp_path, files):
    async with FakeLLMServer(write_then("I could not change notes.txt.")) as model:
        code, out, err = await run_nerve("ask", "Add bread to notes.txt", env=env_for(tmp_path, files, model))
        model.assert_complete()
    assert code == 0, err
    assert "not run: write_file needs approval; run with --yes to approve" in err
    assert "I could not change notes.txt." in out
    assert (files / "notes.txt").read_text() == BEFORE


async def test_ask_with_yes_approves_the_write_and_json_says_who_approved_it(tmp_path, files):
    async with FakeLLMServer(write_then("Added bread.")) as model:
        env = env_for(tmp_path, files, model)
        code, out, err = await run_nerve("ask", "--yes", "--json", "Add bread to notes.txt", env=env)
        model.assert_complete()
    assert code == 0, err
    assert "not run" not in err
    answer = json.loads(out)
    assert answer["text"] == "Added bread."
    [call] = answer["tool_calls"]
    assert call["name"] == "write_file" and call["is_error"] is False
    assert call["approval"] == "approved" and call["decided_by"] == USER
    assert (files / "notes.txt").read_text() == AFTER


async def test_a_chat_killed_at_the_approval_prompt_asks_again_after_a_restart(tmp_path, files):
    async with FakeLLMServer(write_then("Added bread.")) as model:
        env = env_for(tmp_path, files, model)
        async with terminal(*nerve("chat", "--thread", "notes"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(QUESTION)
            await term.expect(ASKED, after=at)
            os.killpg(term.process.pid, signal.SIGKILL)
            assert await term.exit_code() == -signal.SIGKILL
        assert (files / "notes.txt").read_text() == BEFORE

        async with terminal(*nerve("chat", "--thread", "notes"), env=env) as term:
            at = await term.expect(b"waiting for your decision")
            at = await term.expect(ASKED, after=at)
            term.type(b"y\r")
            at = await term.expect(b"Added bread.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert (files / "notes.txt").read_text() == AFTER
    assert "Traceback" not in term.screen()

"""`nerve chat` on a pseudo-terminal edits its line like a shell: keys move the cursor, Up recalls,
a pasted block is one question, and a paste over the limit is refused out loud.

The real chat runs with the built-in offline model and the example env-query server where a question
calls it (no server where none is asked); only the keys come from the test, as a terminal sends them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from adapters.terminal.views import conversation_key
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage
from tests.conftest import ROOT
from tests.test_cli import shipped_servers
from tests.test_terminal import BANNER, PROMPT, chat_env, nerve, terminal

ENV_QUERY = shipped_servers("env-query")
LEFT = b"\x1b[D"
UP = b"\x1b[A"


def paste(text: bytes) -> bytes:
    return b"\x1b[200~" + text + b"\x1b[201~"


async def stored(tmp_path: Path, thread: str) -> list[ChatMessage]:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        return await store.history(conversation_key(thread))
    finally:
        await store.close()


def questions(history: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in history if m.role == "user"]


def answers(history: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in history if m.role == "assistant" and not m.tool_calls]


async def ask_and_quit(
    tmp_path: Path, thread: str, keys: bytes, servers: dict[str, Any] | None = None, **env: str
) -> bytes:
    """Start the chat, send `keys` at its prompt, wait for the next prompt, leave; what was drawn."""
    chat = nerve("chat", "--thread", thread)
    async with terminal(*chat, env=chat_env(tmp_path, servers=servers, **env)) as term:
        at = await term.expect(PROMPT)
        term.type(keys)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert "Traceback" not in term.screen()
    return term.output


async def test_arrow_keys_edit_the_question_instead_of_being_sent(tmp_path):
    await ask_and_quit(tmp_path, "edit", b"hello wrld" + LEFT * 3 + b"o\r", servers={})
    assert questions(await stored(tmp_path, "edit")) == ["hello world"]


async def test_a_pasted_block_of_lines_is_one_question_with_one_answer(tmp_path):
    block = b"How is the air in A1001?\r\nPlease check it twice.\r\nThanks"
    await ask_and_quit(tmp_path, "paste", paste(block) + b"\r", servers=ENV_QUERY)
    history = await stored(tmp_path, "paste")
    assert questions(history) == ["How is the air in A1001?\nPlease check it twice.\nThanks"]
    assert len(answers(history)) == 1


async def test_up_recalls_a_question_of_an_earlier_chat_from_the_history_file(tmp_path):
    await ask_and_quit(tmp_path, "recall", b"How is the air in A1001?\r", servers=ENV_QUERY)
    history_file = tmp_path / "nerve.history"  # beside nerve.db
    assert "How is the air in A1001?" in history_file.read_text()

    async with terminal(
        *nerve("chat", "--thread", "recall"), env=chat_env(tmp_path, servers=ENV_QUERY)
    ) as term:
        at = await term.expect(PROMPT)
        # Only what changes is drawn: the recalled line appears in place, after the prompt.
        term.type(UP)  # the last line typed: /quit
        at = await term.expect(b"/quit", after=at)
        term.type(UP)
        at = await term.expect(b"A1001?", after=at)  # recalled, not sent
        term.type(b"\r")
        at = await term.expect(b"get_environment_status", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert questions(await stored(tmp_path, "recall")) == ["How is the air in A1001?"] * 2


async def test_a_paste_over_the_limit_is_refused_with_the_limit_not_cut_and_sent(tmp_path):
    long = paste(b"x" * 5_000) + b"\r"
    drawn = await ask_and_quit(tmp_path, "long", long, servers={}, NERVE_MAX_QUESTION_CHARS="1000")
    assert b"Your message is 5,000 characters; the limit is 1,000." in drawn
    assert questions(await stored(tmp_path, "long")) == []  # nothing was sent, nor a cut piece


async def test_the_banner_and_prompt_come_while_the_servers_start_and_an_early_question_waits(tmp_path):
    # The server starts only once the test opens its gate (a FIFO it reads): until then it is starting.
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    behind_the_gate = f'read go < "{gate}"; exec "{sys.executable}" -m servers.env_query'
    server = {"command": "sh", "args": ["-c", behind_the_gate], "cwd": str(ROOT), "trustAnnotations": True}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"env-query": server}}))
    env = chat_env(tmp_path, NERVE_MCP_CONFIG=str(config))
    async with terminal(*nerve("chat", "--thread", "early"), env=env) as term:
        at = await term.expect(BANNER)
        at = await term.expect(b"the MCP servers are starting", after=at)
        at = await term.expect(PROMPT, after=at)
        term.type(b"How is the air in A1001?\r")
        at = await term.expect(b"Waiting for the MCP servers to start", after=at)
        await asyncio.to_thread(gate.write_text, "go\n")  # blocks until the server's shell reads it
        at = await term.expect(b"The MCP servers have started", after=at)
        at = await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert "Traceback" not in term.screen()
    history = await stored(tmp_path, "early")
    assert questions(history) == ["How is the air in A1001?"] and len(answers(history)) == 1

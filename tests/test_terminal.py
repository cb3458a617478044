"""The terminal as a person sees it: `nerve` on a pseudo-terminal, typed keys, Ctrl-C, what is printed."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import struct
import sys
import termios
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.terminal.views import conversation_key
from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.mcp_servers.hostile import MASKED_LINK
from tests.test_cli import WARM_NERVE, nerve_env, shipped_servers

# "you ›": on a terminal the prompt's trailing space is drawn as a cursor move, not a character.
PROMPT = b"you \xe2\x80\xba"
ROWS = 50
# A cursor position request, and the answer a terminal gives with the cursor on its last row.
CURSOR_POSITION_REQUEST = b"\x1b[6n"
CURSOR_POSITION = b"\x1b[%d;1R" % ROWS
BANNER = b"\xe2\x80\x94 thread"  # "nerve — thread", after rich styled "nerve"


def _take_terminal() -> None:
    """In the child, after setsid: make stdin (the pty) the controlling terminal, so Ctrl-C is SIGINT."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A process on a pseudo-terminal: keys go in, everything it draws comes out as bytes."""

    def __init__(self, process: asyncio.subprocess.Process, master: int) -> None:
        self.process = process
        self.output = b""
        self._master = master
        self._changed = asyncio.Event()
        self._closed = False
        self._positions_told = 0
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def start(cls, *argv: str, env: dict[str, str], cwd: Path = ROOT, columns: int = 220) -> Terminal:
        master, slave = os.openpty()
        # By default wide enough that rich never wraps the lines the tests look for.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                # The terminal's size is the one set above: a COLUMNS or LINES inherited from the test
                # run (parallel workers set 80 x 24) would override it.
                env={
                    **{k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")},
                    "TERM": "xterm-256color",
                },
                cwd=str(cwd),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                preexec_fn=_take_terminal,
            )
        finally:
            os.close(slave)
        return cls(process, master)

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            data = b""
        if data:
            self.output += data
            self._tell_cursor_position()
        else:
            self._close_reader()
        self._changed.set()

    def _tell_cursor_position(self) -> None:
        """Answer each cursor position request as a terminal does (the line editor asks, to know the
        room below its prompt)."""
        asked = self.output.count(CURSOR_POSITION_REQUEST)
        while self._positions_told < asked:
            self._positions_told += 1
            with contextlib.suppress(OSError):
                os.write(self._master, CURSOR_POSITION)

    def _close_reader(self) -> None:
        if not self._closed:
            self._closed = True
            asyncio.get_running_loop().remove_reader(self._master)

    def type(self, keys: bytes) -> None:
        os.write(self._master, keys)

    async def expect(self, text: bytes, *, after: int = 0, within: float = 30) -> int:
        """Wait until `text` is on the screen past offset `after`; where it ends."""
        try:
            async with asyncio.timeout(within):
                while (found := self.output.find(text, after)) < 0:
                    if self._closed:
                        break
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            found = -1
        if found < 0:
            raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen()}")
        return found + len(text)

    async def until(self, check: Callable[[bytes], bool], what: str, *, within: float = 30) -> None:
        """Wait until `check(everything drawn so far)` holds; `what` names it when it never does."""
        try:
            async with asyncio.timeout(within):
                while not check(self.output):
                    if self._closed:
                        break
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            pass
        if not check(self.output):
            raise AssertionError(f"never: {what}; the screen:\n{self.screen()}")

    async def exit_code(self, *, within: float = 60) -> int:
        """Wait for the process to end and for everything it drew."""
        async with asyncio.timeout(within):
            code = await self.process.wait()
            while not self._closed:
                self._changed.clear()
                await self._changed.wait()
        return code

    def screen(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        self._close_reader()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        os.close(self._master)


@contextlib.asynccontextmanager
async def terminal(
    *argv: str, env: dict[str, str], cwd: Path = ROOT, columns: int = 220
) -> AsyncIterator[Terminal]:
    term = await Terminal.start(*argv, env=env, cwd=cwd, columns=columns)
    try:
        yield term
    finally:
        term.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await term.process.wait()


def nerve(*args: str) -> tuple[str, ...]:
    """`nerve ARGS` started warm (`tests/warm_nerve`): for tests of what the chat says and does."""
    return (*WARM_NERVE, *args)


def cold_nerve(*args: str) -> tuple[str, ...]:
    """`python -m bot ARGS` started the usual way: for the tests here, of the process on its terminal
    (its session, Ctrl-C, how it starts and leaves)."""
    return (sys.executable, "-m", "bot", *args)


def chat_env(tmp_path: Path, *, servers: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    """`nerve_env` with the log in a file of the test's own (`servers` as there)."""
    return nerve_env(tmp_path, servers=servers, NERVE_LOG_FILE=str(tmp_path / "nerve.log"), **extra)


def warning_server_config(tmp_path: Path, line: str) -> Path:
    """An MCP server that writes `line` to its stderr at start, then serves the test kit."""
    config = tmp_path / "mcp.json"
    script = f"echo '{line}' >&2; exec {sys.executable} -m tests.mcp_servers.testkit"
    config.write_text(
        json.dumps({"mcpServers": {"noisy": {"command": "sh", "args": ["-c", script], "cwd": str(ROOT)}}})
    )
    return config


# --- starting and leaving -------------------------------------------------------------------------


async def test_nerve_without_a_subcommand_starts_the_chat_on_a_terminal(tmp_path):
    async with terminal(*cold_nerve(), env=chat_env(tmp_path)) as term:
        at = await term.expect(BANNER)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert "Traceback" not in term.screen()


async def test_ctrl_c_at_the_prompt_leaves_the_chat_cleanly(tmp_path):
    async with terminal(*cold_nerve("chat"), env=chat_env(tmp_path, servers={})) as term:
        await term.expect(PROMPT)
        term.type(b"\x03")
        assert await term.exit_code() == 0
    assert "Traceback" not in term.screen() and "KeyboardInterrupt" not in term.screen()


async def test_make_run_interrupted_at_the_prompt_ends_quietly(tmp_path):
    venv = Path(sys.prefix)
    if shutil.which("make") is None or not (venv / "bin" / "nerve").exists():
        pytest.skip("needs make and the nerve console script in the running environment")
    # `-o` the stamp: use the environment the tests run in, never reinstall it.
    argv = ("make", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", "run")
    async with terminal(*argv, env=chat_env(tmp_path)) as term:
        await term.expect(PROMPT)
        term.type(b"\x03")
        await term.exit_code()
    screen = term.screen()
    assert "Error 130" not in screen and "Interrupt" not in screen
    assert "Traceback" not in screen and "make: ***" not in screen


# --- logs stay out of the conversation ------------------------------------------------------------


async def test_a_server_warning_goes_to_the_log_file_not_between_the_turns(tmp_path):
    line = "ERROR: cache directory is read-only"
    env = chat_env(tmp_path, NERVE_MCP_CONFIG=str(warning_server_config(tmp_path, line)))
    log = tmp_path / "nerve.log"
    async with terminal(*cold_nerve("chat"), env=env) as term:
        await term.expect(PROMPT)
        # Another turn, in case the server's line reached the log only after the first prompt.
        term.type(b"/help\r")
        # Said once, between the turns: where the log is.
        await term.expect(str(log).encode())
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert line in log.read_text()
    assert line not in term.screen()
    assert term.screen().count(str(log)) == 1


async def test_with_verbose_the_log_goes_to_stderr_and_no_file_is_written(tmp_path):
    line = "ERROR: cache directory is read-only"
    env = chat_env(tmp_path, NERVE_MCP_CONFIG=str(warning_server_config(tmp_path, line)))
    async with terminal(*cold_nerve("chat", "-v"), env=env) as term:
        await term.expect(line.encode())
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert not (tmp_path / "nerve.log").exists()


# --- hostile text -----------------------------------------------------------------------------------


async def test_a_typed_line_with_invalid_utf8_is_answered_and_stored(tmp_path):
    env = chat_env(tmp_path, servers=shipped_servers("env-query"))
    async with terminal(*cold_nerve("chat", "--thread", "bytes"), env=env) as term:
        at = await term.expect(PROMPT)
        term.type(b"How is the air in A1001? caf\xe9 \xff\r")
        at = await term.expect(b"get_environment_status", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert "Traceback" not in term.screen()
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        history = await store.history(conversation_key("bytes"))
    finally:
        await store.close()
    assert history[0].content == "How is the air in A1001? caf\ufffd \ufffd"


HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J"


async def test_escape_sequences_from_tools_and_the_model_never_reach_the_terminal(tmp_path):
    config = tmp_path / "mcp.json"
    testkit = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.testkit"],
        "cwd": str(ROOT),
        "trustAnnotations": True,
    }
    config.write_text(json.dumps({"mcpServers": {"kit": testkit}}))
    script = [
        tool_reply(FakeCall(name="echo", arguments=json.dumps({"text": f"tool {HOSTILE} said"}), id="c1")),
        reply(f"model {HOSTILE} said"),
    ]
    async with FakeLLMServer(script) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=str(config))
        async with terminal(*cold_nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"echo it\r")
            at = await term.expect(b"said", after=at)
            at = await term.expect(PROMPT, after=at)
            term.type(b"/show 1\r")
            at = await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    screen = term.output
    assert b"model " in screen and b"tool " in screen
    assert b"\x1b]52" not in screen and b"\x1b[2J" not in screen and b"\x07" not in screen
    assert b"]52;c;" in screen, "the text is shown, made harmless"


async def test_links_from_tools_and_the_model_show_their_target_and_are_never_hidden_hyperlinks(tmp_path):
    """rich would print `[google.com](https://evil.example/c?d=SECRET)` as an OSC 8 hyperlink whose
    only visible text is "google.com"; the chat shows where every link goes instead."""
    config = tmp_path / "mcp.json"
    hostile = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.hostile"],
        "cwd": str(ROOT),
        "approval": "never",
    }
    config.write_text(json.dumps({"mcpServers": {"hostile": hostile}}))
    script = [
        tool_reply(FakeCall(name="find_page", arguments=json.dumps({"query": "cats"}), id="c1")),
        # The model passes the tool's link on, as models do.
        reply(f"Found it: {MASKED_LINK}"),
    ]
    async with FakeLLMServer(script) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=str(config))
        async with terminal(*cold_nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"/tools\r")
            at = await term.expect(PROMPT, after=at)
            term.type(b"find the cats page\r")
            at = await term.expect(b"Found it", after=at)
            at = await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert b"\x1b]8;" not in term.output, "no hyperlink escape sequence at all"
    seen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", term.screen())
    assert "on google.com (https://evil.example/d)" in seen, "the tool list"
    assert "Found it: google.com (https://evil.example/c?d=SECRET)" in seen, "the answer"
    assert "[google.com](" not in seen

"""Links, texts and files a tool returns, in the terminal: a line each under the call, the texts in
full (capped) under `/show`, files listed and never written anywhere.

`nerve chat` runs on a pseudo-terminal (and once on a pipe) against the real `asks` MCP server as a
stdio subprocess, whose `give_resources` returns a link, a Markdown receipt and a PNG logo, and the
local fake model service.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from rich.console import Console

from adapters.terminal.views import TEXT_SHOWN, print_attachment, print_reply
from bot.types import AgentReply, Attachment, Resource
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.mcp_servers.asks import LOGO_PNG, MENU_URI, RECEIPT_MARKDOWN
from tests.test_cli import run_nerve
from tests.test_terminal import PROMPT, chat_env, nerve, terminal

LOGO_LINE = f"[file logo.png, image/png, {len(LOGO_PNG):,} bytes]"


def env_for(tmp_path: Path, model: FakeLLMServer) -> dict[str, str]:
    config = tmp_path / "mcp.json"
    asks = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.asks"],
        "cwd": str(ROOT),
        "trustAnnotations": True,
    }
    config.write_text(json.dumps({"mcpServers": {"asks": asks}}))
    return chat_env(
        tmp_path, NERVE_MCP_CONFIG=str(config), OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="t"
    )


def script() -> list:
    return [tool_reply(FakeCall(name="give_resources", id="c1")), reply("Here is the menu.")]


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.rglob("*") if p.is_file()}


async def test_the_chat_lists_the_link_the_text_and_the_file_and_show_prints_the_text(tmp_path):
    async with FakeLLMServer(script()) as model:
        env = env_for(tmp_path, model)
        before = files_in(tmp_path)
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"menu please\r")
            at = await term.expect(b"Here is the menu.", after=at)
            at = await term.expect(PROMPT, after=at)
            answer = term.screen()
            term.type(b"/show 1\r")
            at = await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert f"Today's menu: {MENU_URI}" in answer
    assert LOGO_LINE in answer
    assert f"latest \x1b[2m(text/markdown, {len(RECEIPT_MARKDOWN)} characters)" in answer
    assert "/show N expands a tool result and the texts it returned." in answer
    shown = term.screen()[len(answer) :]
    assert "── latest (text/markdown) ──" in shown and "| Margherita | 9.50 |" in shown
    # The prompt's history file is beside the database; nothing a tool returned is written.
    written = {"nerve.db", "nerve.db-wal", "nerve.db-shm", "nerve.log", "nerve.history"}
    assert files_in(tmp_path) - before <= written


async def test_off_a_terminal_the_same_lines_follow_the_answer(tmp_path):
    async with FakeLLMServer(script()) as model:
        code, out, _ = await run_nerve("chat", env=env_for(tmp_path, model), stdin="menu please\n/show 1\n")
        model.assert_complete()
    assert code == 0
    after = out[out.index("Here is the menu.") :]
    assert f"Today's menu: {MENU_URI}" in after and LOGO_LINE in after
    assert "# Receipt" in after[after.index("── latest") :]


def test_every_link_is_printed_as_text_and_texts_are_capped_under_show() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, force_terminal=False)
    resources = (
        Resource(uri="javascript:alert(1)", name="Click [bold]me[/bold]", link=True),
        Resource(uri="https://evil.example/\x1b]52;c;x\x07", name="Bank", link=True),
        Resource(uri="x://long", name="long", text="y" * (TEXT_SHOWN + 10)),
    )
    attachment = Attachment(
        tool_call_id="c1",
        name="t",
        arguments={},
        is_error=False,
        latency_ms=1.0,
        summary="ok",
        content="ok",
        resources=resources,
    )
    print_reply(console, AgentReply(text="done", attachments=(attachment,)))
    print_attachment(console, 1, attachment)
    text = out.getvalue()
    assert "Click [bold]me[/bold]: javascript:alert(1)" in text, "markup in a name is shown, not obeyed"
    assert "\x1b" not in text and "\\x1b]52" in text
    assert "y" * TEXT_SHOWN not in text and f"(cut here: {TEXT_SHOWN + 10:,} characters in all)" in text

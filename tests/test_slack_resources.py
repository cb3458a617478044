"""Links, texts and files a tool returns, on Slack: links and texts in the reply's details, files
uploaded into the reply's thread after the answer, once each.

End to end: the real bolt app over signed HTTP, the fake Slack Web API (which records each file as
`files_upload_v2` sends it), the fake model service, and the real `asks` MCP server as a stdio
subprocess whose `give_resources` returns a link, a Markdown receipt and a PNG logo.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.render import MAX_RESOURCE_FILES, Level, render_reply, resource_link
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.types import AgentReply, Attachment, Resource, ToolResult
from tests.conftest import ROOT
from tests.fakes.llm_server import reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.mcp_servers.asks import LOGO_PNG, MENU_URI, RECEIPT_MARKDOWN
from tests.test_slack_harness import mention, rig

CHANNEL = "C0CHANNEL"


@pytest.fixture(scope="module")
async def asks() -> AsyncIterator[MCPHost]:
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.asks"], cwd=str(ROOT)
    )
    async with MCPHost({"asks": server}, default_timeout=30.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


def resources_turn() -> list[Any]:
    return [tool_reply(("give_resources", "{}")), reply("Here is the menu, the receipt and the logo.")]


def everything(version: dict[str, Any]) -> str:
    return json.dumps([version.get("blocks") or [], version.get("attachments") or []], ensure_ascii=False)


def attachment(*resources: Resource, call_id: str = "c1") -> Attachment:
    return Attachment(
        tool_call_id=call_id,
        name="give_resources",
        arguments={},
        is_error=False,
        latency_ms=5.0,
        summary="ok",
        content="Here you are.",
        resources=resources,
    )


# --- end to end ------------------------------------------------------------------------------------


async def test_a_link_and_a_text_show_in_the_details_and_the_logo_goes_up_once_after_the_answer(
    tmp_path: Path, asks: MCPHost
) -> None:
    thread = "1600000000.009100"
    async with rig(tmp_path, resources_turn(), host=asks) as r:
        event = mention(f"<@{BOT_USER_ID}> menu please", ts=thread)
        await r.deliver(event)
        await r.settle()
        # Slack retries the delivery: it is acknowledged and ignored, nothing goes up again.
        await r.deliver(event, retry_num=1)
        await r.settle()

        [answer] = r.slack.thread(CHANNEL, thread)
        blocks = answer.current["blocks"]
        call, receipt, text = blocks
        assert call["type"] == "container" and call["title"]["text"] == "give_resources · asks"
        details = json.dumps(call["child_blocks"], ensure_ascii=False)
        assert f"Today's menu `{MENU_URI}`" in details, "a server's own scheme is text in code"
        assert "<asks:" not in everything(answer.current), "and never a link"
        assert "logo.png, image/png, " + f"{len(LOGO_PNG):,} bytes" in details
        assert "attached to this thread" in details
        assert receipt["type"] == "container" and receipt["title"]["text"] == "latest"
        assert "text/markdown" in receipt["subtitle"]["text"]
        shown = receipt["child_blocks"][0]["text"]["text"]
        assert shown == "```" + RECEIPT_MARKDOWN + "```"
        assert text == {"type": "markdown", "text": "Here is the menu, the receipt and the logo."}

        [logo] = r.slack.shared
        assert logo.data == LOGO_PNG and logo.filename == "logo.png"
        assert logo.channel == CHANNEL and logo.thread_ts == thread
        assert logo.alt_txt == "logo.png"
        methods = [c.method for c in r.slack.calls if c.ok]
        last_post = max(i for i, m in enumerate(methods) if m in ("chat.postMessage", "chat.update"))
        assert methods.index("files.getUploadURLExternal") > last_post, "the answer is posted first"


async def test_a_refused_upload_is_one_line_in_the_thread_and_the_answer_stands(
    tmp_path: Path, asks: MCPHost
) -> None:
    thread = "1600000000.009200"
    async with rig(tmp_path, resources_turn(), host=asks) as r:
        r.slack.fail_uploads = 1
        await r.deliver(mention(f"<@{BOT_USER_ID}> menu please", ts=thread))
        await r.settle()
        answer, note = r.slack.thread(CHANNEL, thread)
        assert answer.text == "Here is the menu, the receipt and the logo."
        assert note.text == "⚠️ Could not attach logo.png to this thread."
        assert "\n" not in note.text and not r.slack.shared
        assert "Sorry" not in json.dumps([p.versions for p in r.slack.posted])


async def test_files_go_up_once_when_slack_refuses_the_rich_details_and_they_are_sent_again(
    tmp_path: Path,
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))

    def drawing(arguments: dict[str, Any]) -> ToolResult:
        link = Resource(uri="https://docs.example.com/a?b=1&c=2", name="Docs", link=True)
        return ToolResult(
            content="drawn",
            resources=(link, Resource(uri="", name="chart.png", mime_type="image/png", data=png)),
        )

    thread = "1600000000.009300"
    script = [tool_reply(("draw", "{}")), reply("Drawn.")]
    async with rig(tmp_path, script, tools={"draw": drawing}) as r:
        r.slack.refuse_block_types = {"container"}
        await r.deliver(mention(f"<@{BOT_USER_ID}> draw", ts=thread))
        await r.settle()
        [answer] = r.slack.thread(CHANNEL, thread)
        [legacy] = answer.current["attachments"]
        assert "<https://docs.example.com/a?b=1&amp;c=2|Docs (docs.example.com)>" in legacy["text"]
        [chart] = r.slack.shared
        assert chart.data == png and chart.filename == "chart.png"
        assert len(r.slack.calls_of("files.completeUploadExternal")) == 1


# --- what the details say --------------------------------------------------------------------------


def test_only_web_links_are_clickable_and_each_names_the_host_it_really_opens() -> None:
    def shown(uri: str, name: str) -> str:
        return resource_link(Resource(uri=uri, name=name, link=True))

    assert (
        shown("https://menu.example.com/today", "Menu")
        == "<https://menu.example.com/today|Menu (menu.example.com)>"
    )
    pretend = shown("https://evil.example/login", "https://bank.example")
    assert pretend == "<https://evil.example/login|https://bank.example (evil.example)>"
    for uri in ("javascript:alert(1)", "file:///etc/passwd", "asks://menu/today", "data:text/html,<b>x</b>"):
        out = shown(uri, "Click me")
        assert not out.startswith("<") and out.startswith("Click me `") and "<" not in out
    # A name cannot close the link early or ping anyone; the URL cannot smuggle markup.
    tricky = shown("https://a.example/x|y>z", "<!here> a|b > c")
    assert tricky.startswith("<https://a.example/x%7Cy%3Ez|") and "<!here>" not in tricky
    assert tricky.count("<") == 1 and tricky.count(">") == 1
    # A user name in the URL, or a look-alike host, never decides what people read.
    assert not shown("https://bank.example@evil.example/", "Bank").startswith("<")
    assert "(xn--" in shown("https://аpple.example/", "Apple")


def test_a_long_text_is_capped_in_its_detail_and_goes_up_whole() -> None:
    long = "line\n" * 2000
    rendered = render_reply(
        AgentReply(text="ok", attachments=(attachment(Resource(uri="x://notes", name="notes", text=long)),)),
        Level.RICH,
    )
    _, notes, _ = rendered.messages[0].blocks or []
    assert len(notes["child_blocks"][0]["text"]["text"]) <= 3000
    assert "attached to this thread as a file" in json.dumps(notes)
    [upload] = rendered.uploads
    assert upload.content == long and upload.filename == "notes.txt"


def test_files_past_the_limit_are_named_in_the_details_not_uploaded() -> None:
    files = [Resource(uri="", name=f"f{i}.bin", data=b"x") for i in range(MAX_RESOURCE_FILES + 2)]
    rendered = render_reply(AgentReply(text="ok", attachments=(attachment(*files),)), Level.LEGACY)
    assert [u.filename for u in rendered.uploads] == [f"f{i}.bin" for i in range(MAX_RESOURCE_FILES)]
    text = (rendered.messages[0].attachments or [])[0]["text"]
    assert text.count("attached to this thread") == MAX_RESOURCE_FILES
    assert "… and 2 more; 2 files not attached: too many files" in text


async def test_a_streamed_answer_ends_with_the_details_and_the_file_goes_up_once(
    tmp_path: Path, asks: MCPHost
) -> None:
    thread = "1600000000.009400"
    async with rig(tmp_path, resources_turn(), host=asks) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> menu please", ts=thread))
        await r.settle()
        [answer] = r.slack.thread(CHANNEL, thread)
        assert answer.streaming is False
        final = json.dumps(answer.current, ensure_ascii=False)
        assert f"Today's menu `{MENU_URI}`" in final and "# Receipt" in final
        [logo] = r.slack.shared
        assert logo.data == LOGO_PNG and logo.thread_ts == thread

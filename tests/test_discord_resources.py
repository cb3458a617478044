"""Links, texts and files a tool returns, on Discord: files in a message right after the answer,
links and texts behind the "Tool results" button.

End to end: real discord.py against the local fake Discord (which records each multipart part),
the real agent and store, the fake model service, and the real `asks` MCP server as a stdio
subprocess whose `give_resources` returns a link, a Markdown receipt and a PNG logo.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

import pytest

from adapters.discord.render import (
    FILE_LIMIT_BYTES,
    FILES_PER_MESSAGE,
    reply_files,
    resource_link,
    results_view,
    tool_line,
)
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.types import Attachment, Resource
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord, Part, Recorded, running_bot
from tests.fakes.llm_server import FakeLLMServer, Reply, reply, tool_reply
from tests.mcp_servers.asks import LOGO_PNG, MENU_URI, RECEIPT_MARKDOWN
from tests.test_discord_bot import CALLBACK, THREADS, agent_for, button_ids, final_answer

FOLLOW_UP = r"/webhooks/\d+/[^/]+"


@pytest.fixture(scope="module")
async def asks() -> AsyncIterator[MCPHost]:
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.asks"], cwd=str(ROOT)
    )
    async with MCPHost({"asks": server}, default_timeout=30.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def script() -> list[Reply]:
    return [tool_reply(("give_resources", "{}")), reply("Here is the menu, the receipt and the logo.")]


def files_in(requests: list[Recorded]) -> list[Part]:
    return [p for r in requests for p in r.parts if p.filename]


def attachment(*resources: Resource) -> Attachment:
    return Attachment(
        tool_call_id="c1",
        name="give_resources",
        arguments={},
        is_error=False,
        latency_ms=5.0,
        summary="ok",
        content="Here you are.",
        resources=resources,
    )


# --- end to end ------------------------------------------------------------------------------------


async def test_the_logo_follows_the_answer_once_and_the_button_shows_the_link_and_the_receipt(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with (
        FakeLLMServer([*script(), reply("synced")]) as llm,
        agent_for(llm, store, asks) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("ada")
        message = await fake.user_says(user, "menu please", mention_bot=True)
        await fake.dispatch("MESSAGE_CREATE", message)  # a gateway re-delivery: answered once
        answer = await final_answer(fake, fake.channel_id)
        await fake.wait_for("POST", THREADS)
        # A later conversation as a sync point: a second answer to the re-delivery would come first.
        await fake.user_dms(user, "sync point")
        await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages")

        assert (
            "🔧 give_resources · asks ✓" in answer["content"]
            and "1 link, 1 text, 1 file" in answer["content"]
        )
        posts = fake.find("POST", rf"/channels/{fake.channel_id}/messages")
        [logo] = files_in(posts)
        assert logo.filename == "logo.png" and logo.data == LOGO_PNG
        [with_files] = [m for m in fake.bot_messages(fake.channel_id) if m["attachments"]]
        assert int(with_files["id"]) > int(answer["id"]), "the files come right after the answer"
        assert with_files["content"] == "-# 📎 From give\\_resources: logo.png"
        assert with_files["allowed_mentions"]["parse"] == []

        (custom_id,) = button_ids(answer)
        await fake.click(user, answer, custom_id)
        (callback,) = await fake.wait_for("POST", CALLBACK)
        call, receipt = callback.body()["data"]["embeds"]
        [links] = [f["value"] for f in call["fields"] if f["name"] == "Links and files"]
        assert f"Today's menu: `{MENU_URI}`" in links, "a server's own scheme is text in code"
        assert "](asks:" not in json.dumps(callback.body()), "never a link"
        assert f"logo.png, image/png, {len(LOGO_PNG):,} bytes" in links
        assert receipt["title"] == "📄 latest" and RECEIPT_MARKDOWN in receipt["description"]
        assert receipt["footer"]["text"] == "text/markdown · from give_resources"


async def test_after_ask_the_files_go_as_a_follow_up_and_a_refused_one_is_a_one_line_note(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with (
        FakeLLMServer([*script(), *script()]) as llm,
        agent_for(llm, store, asks) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("bea")
        await fake.slash(user, "ask", {"question": "menu please"}, channel_id=fake.channel_id)
        (follow_up,) = await fake.wait_for("POST", FOLLOW_UP)
        [logo] = files_in([follow_up])
        assert logo.data == LOGO_PNG and follow_up.body()["content"].endswith("logo.png")

        # Discord refuses the files (through the token, then in the channel): the answer stands.
        fake.fail_next("POST", FOLLOW_UP, status=413, code=40005, message="Request entity too large")
        fake.fail_next("POST", rf"/channels/{fake.channel_id}/messages", status=413, code=40005)
        await fake.slash(user, "ask", {"question": "again please"}, channel_id=fake.channel_id)
        await fake.wait_until(lambda: any("Could not attach" in m["content"] for m in fake.bot_messages()))
        [note] = [m for m in fake.bot_messages() if "Could not attach" in m["content"]]
        assert note["content"] == "-# ⚠️ Could not attach logo.png." and not note["attachments"]
        answers = [m for m in fake.bot_messages() if "Here is the menu" in m["content"]]
        assert len(answers) == 2
        llm.assert_complete()


# --- what is shown ---------------------------------------------------------------------------------


def test_only_web_links_are_clickable_and_each_names_the_host_it_really_opens() -> None:
    def shown(uri: str, name: str) -> str:
        return resource_link(Resource(uri=uri, name=name, link=True))

    assert shown("https://menu.example.com/today", "Menu") == (
        "[Menu \\(menu.example.com\\)](https://menu.example.com/today)"
    )
    pretend = shown("https://evil.example/login", "[Bank](https://bank.example)")
    assert pretend.endswith("\\(evil.example\\)](https://evil.example/login)")
    assert pretend.count("](") == 1, "the name cannot open a link of its own"
    for uri in ("javascript:alert(1)", "file:///etc/passwd", "asks://menu/today"):
        out = shown(uri, "Click me")
        assert out == f"Click me: `{uri}`" and "](" not in out
    assert shown("https://a.example/x) [y](z", "A").endswith("(https://a.example/x%29%20%5By%5D%28z)")


def test_files_past_discords_limits_are_named_not_sent() -> None:
    small = [Resource(uri="", name=f"f{i}.bin", data=b"x") for i in range(FILES_PER_MESSAGE + 1)]
    huge = Resource(uri="", name="huge.bin", data=b"\0" * (FILE_LIMIT_BYTES + 1))
    shown = reply_files((attachment(huge, *small),))
    assert shown is not None
    assert [name for name, _ in shown.files] == [f"f{i}.bin" for i in range(FILES_PER_MESSAGE)]
    assert f"Not attached: huge.bin ({FILE_LIMIT_BYTES + 1:,} bytes: larger than Discord takes)" in (
        shown.content
    )
    assert f"Not attached: f{FILES_PER_MESSAGE}.bin (more than 10 files)" in shown.content
    assert reply_files((attachment(Resource(uri="https://a.example", name="a", link=True)),)) is None


def test_texts_count_against_ten_embeds_and_the_rest_goes_into_the_file() -> None:
    texts = [Resource(uri=f"x://t{i}", name=f"t{i}", text=f"text {i}") for i in range(12)]
    view = results_view((attachment(*texts),))
    assert len(view.embeds) == 10 and view.embeds[1].title == "📄 t0"
    assert view.file_text is not None and "text 11" in view.file_text
    assert tool_line(attachment(*texts)).endswith("· 12 texts")


def test_the_answer_line_without_resources_is_unchanged() -> None:
    assert tool_line(attachment()) == "-# 🔧 give_resources ✓ 5 ms"

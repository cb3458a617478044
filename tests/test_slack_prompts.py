"""`/nerve prompt` end to end: the real bolt app over HTTP against the fake Slack, the real `asks`
MCP server (prompts `summarize(topic, tone?)` and `hello`) over stdio, and the real `openai` client
against the fake model service.

A started prompt is posted in the channel by the bot, naming who started it, and answered in that
post's thread as a mention is; the model gets the text the server filled in as the person's message.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.prompt_arguments import completion_at_end, parse_arguments
from adapters.slack import commands as prompt_command
from adapters.slack.app import build_bot
from adapters.slack.client import make_client
from bot.errors import PromptError
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.types import PromptArgument, PromptSpec
from tests.conftest import ROOT
from tests.fakes.llm_server import Reply, reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.test_slack_harness import Rig, mention, rig, settings_for, user_texts

CHANNEL = "C0CHANNEL"
ALICE = "U0ALICE"
WEATHER = "Summarize what you know about the weather in a dry tone."


@pytest.fixture(scope="module")
async def asks() -> AsyncIterator[MCPHost]:
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.asks"], cwd=str(ROOT)
    )
    async with MCPHost({"asks": server}, default_timeout=10.0) as host:
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        yield host


def echo(body: dict[str, Any]) -> Reply:
    return reply("echo: " + user_texts(body)[-1])


async def nerve(
    r: Rig, text: str, channel: str = CHANNEL, response_url: str = "http://127.0.0.1:9/unused"
) -> str:
    """Type `/nerve TEXT`; returns what the acknowledgement says (only the typist sees it)."""
    raw = urlencode(
        {
            "command": "/nerve",
            "text": text,
            "team_id": TEAM_ID,
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": ALICE,
            "user_name": "alice",
            "trigger_id": "1.2.3",
            "response_url": response_url,
            "token": "legacy",
        }
    )
    status, body = await r.deliver_raw(raw, "application/x-www-form-urlencoded")
    assert status == 200
    if not body:
        return ""
    answer = json.loads(body)
    assert answer["response_type"] == "ephemeral"
    return str(answer["text"])


async def test_a_started_prompt_is_posted_by_the_bot_and_answered_in_its_thread_like_a_mention(
    tmp_path: Path, asks: MCPHost
) -> None:
    async with rig(tmp_path, echo, host=asks) as r:
        assert await nerve(r, 'prompt summarize topic="the weather" tone=dry') == ""
        await r.settle()

        [post] = r.slack.thread(CHANNEL, None)
        assert post.text == f"<@{ALICE}> started the prompt summarize: {WEATHER}"
        assert user_texts(r.llm.requests[0]) == [WEATHER], "the model gets the server's text, as typed"
        [answer] = r.slack.thread(CHANNEL, post.ts)
        assert answer.text == f"echo: {WEATHER}"
        assert await r.store.unfinished_events("slack") == []

        # The thread is a conversation like any other: a mention there continues it.
        await r.deliver(mention(f"<@{BOT_USER_ID}> and wealth?", thread_ts=post.ts))
        await r.settle()
        assert user_texts(r.llm.requests[1]) == [WEATHER, "and wealth?"]
        assert [p.text for p in r.slack.thread(CHANNEL, post.ts)][-1] == "echo: and wealth?"
        assert len(r.slack.thread(CHANNEL, None)) == 1, "nothing else posted in the channel"


async def test_a_value_without_a_name_fills_the_first_required_argument(
    tmp_path: Path, asks: MCPHost
) -> None:
    async with rig(tmp_path, echo, host=asks) as r:
        assert await nerve(r, "prompt summarize welding") == ""
        await r.settle()
        assert user_texts(r.llm.requests[0]) == ["Summarize what you know about welding."]


async def test_in_a_dm_the_prompt_is_answered_in_the_thread_of_its_post(
    tmp_path: Path, asks: MCPHost
) -> None:
    async with rig(tmp_path, echo, host=asks) as r:
        assert await nerve(r, "prompt hello", channel="D0ALICE") == ""
        await r.settle()
        [post] = r.slack.thread("D0ALICE", None)
        assert post.text == f"<@{ALICE}> started the prompt hello: Say hello to the person."
        [answer] = r.slack.thread("D0ALICE", post.ts)
        assert answer.text == "echo: Say hello to the person."


async def test_a_prompt_stopped_by_a_restart_is_answered_after_it_in_the_same_thread(
    tmp_path: Path, asks: MCPHost
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def model(request: dict[str, Any]) -> Reply:
        if not started.is_set():
            started.set()  # the process stops while the model is still thinking
            await release.wait()
            return reply("too late")
        return echo(request)

    async with rig(tmp_path, model, host=asks) as r:
        assert await nerve(r, "prompt summarize wealth") == ""
        async with asyncio.timeout(10):
            await started.wait()
        await r.bot.aclose()
        release.set()
        [post] = r.slack.thread(CHANNEL, None)
        assert [event for event, _ in await r.store.unfinished_events("slack")] == [
            f"prompt:{CHANNEL}:{post.ts}"
        ]

        settings = settings_for(r.slack)
        again = build_bot(r.agent, settings, client=make_client(settings), pace=0, status_interval=0)
        try:
            assert await again.recover() == 1
            async with asyncio.timeout(10):
                await again.idle()
        finally:
            await again.aclose()
        assert user_texts(r.llm.requests[-1]) == ["Summarize what you know about wealth."]
        assert [p.text for p in r.slack.thread(CHANNEL, post.ts)][
            -1
        ] == "echo: Summarize what you know about wealth."
        assert r.slack.thread(CHANNEL, None) == [post], "the prompt is not posted twice"
        assert await r.store.unfinished_events("slack") == []


async def test_the_prompts_offered_here_are_listed_with_their_arguments(
    tmp_path: Path, asks: MCPHost
) -> None:
    async with rig(tmp_path, [], host=asks) as r:
        listed = await nerve(r, "prompts")
        assert "`summarize topic=… [tone=…]` — Summarize what is known about a topic." in listed
        assert "tone (optional): How it should sound" in listed
        assert "`hello` — Say hello." in listed
        assert await nerve(r, "prompt") == listed
        assert "/nerve prompts" in await nerve(r, "help")
        assert r.llm.requests == [] and r.slack.posted == []


async def test_mistakes_are_told_only_to_the_person_and_start_nothing(tmp_path: Path, asks: MCPHost) -> None:
    async with rig(tmp_path, [], host=asks) as r:
        missing = await nerve(r, "prompt summarize tone=dry")
        assert missing.startswith("The prompt summarize needs: topic.")
        assert "`/nerve prompt summarize topic=… [tone=…]`" in missing
        assert "no prompt named 'nope' here. Prompts: hello, summarize." in await nerve(r, "prompt nope")
        assert "has no argument 'colour': its arguments are topic, tone." in await nerve(
            r, "prompt summarize colour=red"
        )
        assert "quote is not closed" in await nerve(r, 'prompt summarize topic="the weather')
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == []
        assert await r.store.unfinished_events("slack") == []


async def test_a_server_slower_than_slacks_deadline_is_waited_for_after_the_ack(
    tmp_path: Path, asks: MCPHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not waiting at all for the server stands for a server slower than Slack's 3 seconds.
    monkeypatch.setattr(prompt_command, "ACK_WAIT", 0.0)
    async with rig(tmp_path, echo, host=asks) as r:
        assert await nerve(r, "prompt summarize weather") == ""
        await r.settle()
        [post] = r.slack.thread(CHANNEL, None)
        assert [p.text for p in r.slack.thread(CHANNEL, post.ts)] == [
            "echo: Summarize what you know about weather."
        ]


async def test_where_the_bot_may_not_post_the_person_is_told_through_the_commands_response_url(
    tmp_path: Path, asks: MCPHost
) -> None:
    async with rig(tmp_path, [], host=asks) as r:
        r.slack.fail_next["chat.postMessage"] = "not_in_channel"
        r.slack.fail_next["chat.postEphemeral"] = "channel_not_found"
        hook = f"{r.slack.base}/api/response-url"
        assert await nerve(r, "prompt hello", response_url=hook) == ""
        await r.settle()
        [told] = r.slack.calls_of("response-url")
        assert told.body == {
            "text": "I cannot post in this channel (not_in_channel): invite me first.",
            "response_type": "ephemeral",
        }
        assert r.llm.requests == [] and await r.store.unfinished_events("slack") == []


def test_arguments_are_read_as_people_type_them() -> None:
    topic, tone = PromptArgument(name="topic", required=True), PromptArgument(name="tone")
    spec = PromptSpec(
        name="summarize", server="asks", original_name="summarize", title="", arguments=(tone, topic)
    )
    assert parse_arguments(spec, "tone=dry “the weather”") == {"topic": "the weather", "tone": "dry"}
    assert parse_arguments(spec, "the weather") == {"topic": "the weather"}, "words without a name join"
    assert parse_arguments(spec, 'tone="" topic="a \\"b\\""') == {"topic": 'a "b"'}, "an empty value is none"
    with pytest.raises(PromptError, match="topic is given twice"):
        parse_arguments(spec, "topic=a b")
    typing = completion_at_end(spec, 'tone="very dry" topic="the we')
    assert typing is not None and (typing.argument, typing.value, typing.known) == (
        "topic",
        "the we",
        {"tone": "very dry"},
    )
    assert typing.written("the weather") == 'tone="very dry" topic="the weather"'

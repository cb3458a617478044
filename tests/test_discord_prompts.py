"""`/prompt` end to end: real discord.py against the fake Discord, the real `asks` MCP server
(prompts `summarize(topic, tone?)` with completion of `topic`, and `hello`) over stdio, and the
real `openai` client against the fake model service.

A started prompt is an `/ask` whose question is the text the server filled in: deferred, answered
in the deferred message, a thread opened on it in a channel. Both options complete as people type.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.discord import commands as discord_commands
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord, FakeUser, running_bot
from tests.fakes.llm_server import FakeLLMServer, Reply, own_text, reply
from tests.test_discord_bot import ORIGINAL, THREADS, agent_for

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


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def user_texts(request: dict[str, Any]) -> list[str]:
    return [own_text(m.get("content")) for m in request["messages"] if m.get("role") == "user"]


def echo(request: dict[str, Any]) -> Reply:
    return reply("echo: " + user_texts(request)[-1])


async def answer_to(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    """The interaction's own response (type 4 message or deferral 5), once it was sent."""
    (callback,) = await fake.wait_for("POST", re.escape(f"/interactions/{interaction['id']}/") + ".*")
    body: dict[str, Any] = callback.body()
    return body


async def typing_into(
    fake: FakeDiscord, user: FakeUser, options: dict[str, str], focused: str, *, channel_id: int
) -> list[dict[str, str]]:
    """The choices offered while `user` types into `/prompt`'s `focused` option, the others filled."""
    command = next(c for c in fake.commands if c["name"] == "prompt")
    data = fake._interaction_base(user, channel_id, 4)
    data["data"] = {
        "id": command["id"],
        "name": "prompt",
        "type": 1,
        "options": [
            {"name": name, "type": 3, "value": value, **({"focused": True} if name == focused else {})}
            for name, value in options.items()
        ],
    }
    await fake.dispatch("INTERACTION_CREATE", data)
    body = await answer_to(fake, data)
    assert body["type"] == 8
    choices: list[dict[str, str]] = body["data"]["choices"]
    return choices


async def test_a_started_prompt_is_answered_as_an_ask_with_the_servers_text_as_the_question(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with FakeLLMServer(echo) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        ada = fake.user("ada")
        interaction = await fake.slash(
            ada,
            "prompt",
            {"name": "summarize", "arguments": 'topic="the weather" tone=dry'},
            channel_id=fake.channel_id,
        )
        assert (await answer_to(fake, interaction))["type"] == 5, "deferred, as /ask is"
        (thread,) = await fake.wait_for("POST", THREADS)

        assert user_texts(llm.requests[0]) == [WEATHER]
        answer_id = fake._interactions[interaction["token"]]["original"]
        last = fake.find("PATCH", ORIGINAL)[-1]
        assert last.path.split("/")[3] == interaction["token"]
        assert last.body()["content"] == f"echo: {WEATHER}", "the answer is in the deferred message"
        assert thread.path == f"/channels/{fake.channel_id}/messages/{answer_id}/threads"

        # The thread continues the conversation the prompt started.
        await fake.user_says(ada, "and wealth?", channel_id=answer_id, mention_bot=True)
        await fake.wait_for("POST", f"/channels/{answer_id}/messages")
        assert user_texts(llm.requests[1]) == [WEATHER, "and wealth?"]


async def test_a_prompt_in_a_dm_is_answered_there(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with FakeLLMServer(echo) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        interaction = await fake.slash(fake.user("ada"), "prompt", {"name": "hello"})
        await fake.wait_until(
            lambda: any(
                "echo: Say hello to the person." in r.body()["content"] for r in fake.find("PATCH", ORIGINAL)
            )
        )
        assert user_texts(llm.requests[0]) == ["Say hello to the person."]
        assert fake.find("PATCH", ORIGINAL)[-1].path.split("/")[3] == interaction["token"]
        assert not fake.find("POST", THREADS), "DMs never open threads"


async def test_a_missing_or_unknown_argument_or_prompt_is_told_only_to_the_person(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with FakeLLMServer([]) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        ada = fake.user("ada")
        said = {}
        for options in (
            {"name": "summarize", "arguments": "tone=dry"},
            {"name": "summarize", "arguments": "colour=red"},
            {"name": "nope"},
        ):
            interaction = await fake.slash(ada, "prompt", options, channel_id=fake.channel_id)
            body = await answer_to(fake, interaction)
            assert body["type"] == 4 and body["data"]["flags"] & 64, "only the person sees it"
            said[options.get("arguments", options["name"])] = body["data"]["content"]
        assert said["tone=dry"] == (
            "The prompt summarize needs: topic.\n"
            "Write it as `/prompt name:summarize arguments:topic=… [tone=…]`"
        )
        assert said["colour=red"].startswith("The prompt summarize has no argument 'colour'")
        assert said["nope"] == "There is no prompt named 'nope' here. Prompts: hello, summarize."
        assert llm.requests == [] and not fake.find("POST", THREADS)


async def test_prompt_names_complete_from_the_prompts_offered_here(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with FakeLLMServer([]) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        ada = fake.user("ada")
        every = await typing_into(fake, ada, {"name": ""}, "name", channel_id=fake.channel_id)
        assert every == [
            {"name": "summarize — Summarize what is known about a topic.", "value": "summarize"},
            {"name": "hello — Say hello.", "value": "hello"},
        ]
        some = await typing_into(fake, ada, {"name": "HEL"}, "name", channel_id=fake.channel_id)
        assert [c["value"] for c in some] == ["hello"]


async def test_the_first_required_argument_completes_from_the_server(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost
) -> None:
    async with FakeLLMServer([]) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        ada = fake.user("ada")

        async def offered(name: str, typed: str) -> list[str]:
            options = {"name": name, "arguments": typed}
            choices = await typing_into(fake, ada, options, "arguments", channel_id=fake.channel_id)
            assert all(c["name"] == c["value"] for c in choices)
            return [c["value"] for c in choices]

        assert await offered("summarize", "we") == ["weather", "wealth", "welding"]
        assert await offered("summarize", "tone=dry topic=wel") == ["tone=dry topic=welding"]
        assert await offered("summarize", "tone=dry wea") == ["tone=dry weather", "tone=dry wealth"]
        assert await offered("hello", "we") == [], "a prompt without arguments completes nothing"
        assert await offered("nope", "we") == []


async def test_a_server_slower_than_discords_deadline_is_waited_for_behind_thinking(
    fake: FakeDiscord, store: SQLiteStore, asks: MCPHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not waiting at all for the server stands for a server slower than Discord's 3 seconds (what
    # nerve checks itself is still known at once and told only to the person).
    monkeypatch.setattr(discord_commands, "ANSWER_WITHIN", 0.0)
    async with FakeLLMServer(echo) as llm, agent_for(llm, store, asks) as agent, running_bot(fake, agent):
        ada = fake.user("ada")
        started = await fake.slash(
            ada, "prompt", {"name": "summarize", "arguments": "weather"}, channel_id=fake.channel_id
        )
        assert (await answer_to(fake, started))["type"] == 5
        await fake.wait_for("POST", THREADS)
        assert user_texts(llm.requests[0]) == ["Summarize what you know about weather."]
        last = fake.find("PATCH", ORIGINAL)[-1]
        assert last.path.split("/")[3] == started["token"]
        assert last.body()["content"] == "echo: Summarize what you know about weather."

"""What a server offers besides tools, in the core: prompts that start turns (with completion of
their arguments), tool lists that change mid-session, and log messages that stay in the log.

Against the real `asks` test server over stdio, on both protocol eras.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator

import pytest

from bot.agent import Agent
from bot.errors import PromptError
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.policy.scopes import Rule, Scopes
from bot.types import ConversationKey, Incoming
from tests.conftest import ROOT
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.test_inputs import tool_results

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="300.1")


@pytest.fixture(scope="module", params=["2025-11-25", "2026-07-28"])
async def host(request: pytest.FixtureRequest) -> AsyncIterator[MCPHost]:
    server = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.asks", "--protocol", request.param],
        cwd=str(ROOT),
    )
    async with MCPHost({"asks": server}, default_timeout=10.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


def make_agent(llm: ScriptedLLM, host: MCPHost, store, **config: object) -> Agent:
    from bot.agent import AgentConfig

    return Agent(llm=llm, host=host, store=store, inbox=store, config=AgentConfig(**config))  # type: ignore[arg-type]


def incoming(text: str = "") -> Incoming:
    return Incoming(key=KEY, text=text, user_id="U1")


async def test_a_servers_prompts_are_offered_with_their_arguments(host, store):
    agent = make_agent(ScriptedLLM([]), host, store)
    prompts = {p.name: p for p in agent.prompts(incoming())}
    assert set(prompts) == {"summarize", "hello"}
    summarize = prompts["summarize"]
    assert summarize.server == "asks" and summarize.description == "Summarize what is known about a topic."
    assert [(a.name, a.required) for a in summarize.arguments] == [("topic", True), ("tone", False)]


async def test_a_prompt_starts_a_turn_with_the_text_the_server_filled_in(host, store):
    llm = ScriptedLLM([Step(text="Weather is the state of the air.")])
    agent = make_agent(llm, host, store)
    question = await agent.prompt_question(incoming(), "summarize", {"topic": "weather", "tone": "dry"})
    assert question == "Summarize what you know about weather in a dry tone."

    reply = await agent.reply(incoming(question))
    assert reply.text == "Weather is the state of the air."
    assert llm.requests[0][-1].content == question


async def test_a_prompt_missing_an_argument_or_unknown_is_refused_with_what_to_do(host, store):
    agent = make_agent(ScriptedLLM([]), host, store)
    with pytest.raises(PromptError, match="needs: topic"):
        await agent.prompt_question(incoming(), "summarize", {})
    with pytest.raises(PromptError, match=r"no prompt named 'nope'.*hello, summarize"):
        await agent.prompt_question(incoming(), "nope", {})


async def test_a_prompt_argument_is_completed_by_its_server(host, store):
    agent = make_agent(ScriptedLLM([]), host, store)
    assert await agent.complete_prompt_argument("summarize", "topic", "we") == [
        "weather",
        "wealth",
        "welding",
    ]
    assert await agent.complete_prompt_argument("summarize", "topic", "wel") == ["welding"]
    assert await agent.complete_prompt_argument("hello", "anything", "x") == []


async def test_a_place_that_may_not_use_the_server_is_not_offered_its_prompts(host, store):
    scopes = Scopes(rules={"slack:C1": Rule(deny=("asks",))})
    agent = make_agent(ScriptedLLM([]), host, store, scopes=scopes)
    assert agent.prompts(incoming()) == []
    with pytest.raises(PromptError):
        await agent.prompt_question(incoming(), "hello", {})
    elsewhere = ConversationKey(platform="slack", workspace="T1", channel="C2", thread="1")
    assert {p.name for p in agent.prompts(Incoming(key=elsewhere, text="", user_id="U1"))} == {
        "summarize",
        "hello",
    }


async def test_tools_added_and_removed_mid_session_are_offered_without_a_restart(host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("grow_tools", {}, id="c_grow")]),
            Step(text="Grown."),
            Step(calls=[Call("new_tool", {}, id="c_new")]),
            Step(text="Used."),
            Step(calls=[Call("shrink_tools", {}, id="c_shrink"), Call("new_tool", {}, id="c_gone")]),
            Step(text="Done."),
        ]
    )
    agent = make_agent(llm, host, store)
    assert "new_tool" not in {t.name for t in agent.tools()}

    await agent.reply(incoming("grow"))
    async with asyncio.timeout(10):
        await host.wait_for(lambda: "new_tool" in {t.name for t in host.list_tools()})
    await agent.reply(incoming("use the new tool"))
    assert "new_tool" in {t.name for t in llm.tools_seen[2]}, "offered once the server said so"
    assert tool_results(llm)["c_new"] == "I am new"

    shrunk = await agent.reply(incoming("shrink and use it"))
    assert shrunk.text.startswith("Done.") and "new_tool failed" in shrunk.text, "and people are told"
    results = tool_results(llm)
    assert results["c_shrink"] == "removed new_tool"
    assert "new_tool" in results["c_gone"], "a call racing the removal fails under its own id"
    async with asyncio.timeout(10):
        await host.wait_for(lambda: "new_tool" not in {t.name for t in host.list_tools()})


async def test_server_log_messages_go_to_the_log_under_the_servers_name_never_into_the_answer(
    host, store, caplog
):
    llm = ScriptedLLM([Step(calls=[Call("chatty", {}, id="c1")]), Step(text="Logged.")])
    with caplog.at_level(logging.INFO, logger="bot.mcp.server.asks"):
        reply = await make_agent(llm, host, store).reply(incoming("be chatty"))
    records = [r for r in caplog.records if r.name == "bot.mcp.server.asks"]
    assert {r.levelno for r in records} == {logging.INFO, logging.WARNING}
    assert reply.text == "Logged." and tool_results(llm)["c1"] == "logged"
    said = [r.getMessage() for r in records]
    assert not any(line in (m.content or "") for line in said for m in llm.requests[-1])


async def test_links_texts_and_files_in_a_result_reach_people_beside_the_answer(host, store):
    from tests.mcp_servers.asks import LOGO_PNG, LOGO_URI, MENU_URI, RECEIPT_MARKDOWN

    llm = ScriptedLLM([Step(calls=[Call("give_resources", {}, id="c1")]), Step(text="Here you are.")])
    reply = await make_agent(llm, host, store).reply(incoming("menu please"))

    [attachment] = reply.attachments
    link, text, file = attachment.resources
    assert link.link and link.uri == MENU_URI and link.name == "Today's menu"
    assert text.text == RECEIPT_MARKDOWN and text.mime_type == "text/markdown"
    assert file.data == LOGO_PNG and file.uri == LOGO_URI and file.name.endswith(".png")
    assert "omitted" in tool_results(llm)["c1"], "the model reads about the file, it does not get its bytes"

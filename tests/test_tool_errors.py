"""A failed tool call reads twice: to the model with what to do next, to people with what happened.

Each error class (S10) is driven through a real turn: a scripted model, real MCP servers, a real store.
The model must still get its instructions; the reply, the attachments and the printed history must
not repeat them, and the three classes (bad arguments, a failing tool, an unreachable tool) must read
differently to people.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from adapters.terminal.views import format_history
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.types import AgentReply, ChatMessage, ConversationKey, Incoming
from tests.fakes.scripted import Call, ScriptedLLM, Step

ROOT = Path(__file__).resolve().parent.parent
KEY = ConversationKey(platform="test", workspace="w", channel="c", thread="errors")

# Instructions written for the model; a person reading the thread must never see them.
MODEL_ONLY = (
    "do not retry",
    "do not call",
    "try again later",
    "call it again",
    "again with",
    "answer with the results",
    "use one of these exact names",
)


def ask(text: str, event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id="u1", event_id=event_id)


def agent(llm: ScriptedLLM, host: MCPHost, store: SQLiteStore) -> Agent:
    async def no_wait(seconds: float) -> None:
        return None

    return Agent(llm=llm, host=host, store=store, inbox=store, config=AgentConfig(), sleep=no_wait)


def seen_by_model(llm: ScriptedLLM) -> str:
    """Every tool message of the last request, as the model read it."""
    return "\n".join(m.content or "" for m in llm.last_request() if m.role == "tool").lower()


def people_texts(reply: AgentReply) -> list[str]:
    """Everything a surface shows people: the answer, each attachment's title line and its detail."""
    return [reply.text, *(a.summary for a in reply.attachments), *(a.content for a in reply.attachments)]


def assert_no_model_instructions(texts: Iterable[str]) -> None:
    for text in texts:
        for phrase in MODEL_ONLY:
            assert phrase not in text.lower(), f"{phrase!r} reached people in: {text!r}"


@pytest.fixture
async def kit_host() -> AsyncIterator[MCPHost]:
    """A fresh testkit server per test: its `crash` tool takes the server down.

    `crash` is no read-only tool; these tests are about failures, not approvals, so it runs unasked.
    """
    kit = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.testkit"],
        cwd=str(ROOT),
        env={},
        approval="never",
    )
    async with MCPHost({"kit": kit}, default_timeout=10.0) as host:
        yield host


async def test_bad_arguments_tell_the_model_how_to_fix_them_and_people_what_was_wrong(loop_host, store):
    bad = Call("simulate_geolocation", {"lat": 999, "lng": 121.47})
    llm = ScriptedLLM([Step(calls=[bad]) for _ in range(4)])
    reply = await agent(llm, loop_host, store).reply(ask("near 999, 121.47"))

    assert "call simulate_geolocation again" in seen_by_model(llm)
    expected = (
        "I could not call simulate_geolocation with valid arguments: "
        "lat: 999 is greater than the maximum of 90"
    )
    assert expected in reply.text
    assert all(a.summary.startswith(expected[:60]) for a in reply.attachments)
    assert "temporarily unavailable" not in " ".join(people_texts(reply))
    assert_no_model_instructions(people_texts(reply))
    llm.assert_complete()


async def test_a_failing_tool_reads_as_failed_to_people_and_the_model_is_told_not_to_retry(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("broken", {})]), Step(calls=[Call("broken", {"reason": "again"})])])
    reply = await agent(llm, loop_host, store).reply(ask("use the broken tool"))

    assert "do not call broken again" in seen_by_model(llm)
    assert "broken failed: backend error: the backend is down" in reply.text
    first, refused = reply.attachments
    assert first.summary == "broken failed: backend error: the backend is down."
    assert refused.summary.startswith("broken was not called again")
    assert "temporarily unavailable" not in " ".join(people_texts(reply))
    assert "valid arguments" not in " ".join(people_texts(reply))
    assert_no_model_instructions(people_texts(reply))
    llm.assert_complete()


async def test_an_answer_after_a_failed_tool_gets_a_warning_that_names_the_failure(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("broken", {})]), Step(text="I can answer from memory.")])
    reply = await agent(llm, loop_host, store).reply(ask("use the broken tool"))

    assert reply.text.startswith("I can answer from memory.")
    assert "⚠️ broken failed: backend error: the backend is down" in reply.text
    assert_no_model_instructions(people_texts(reply))


async def test_a_tool_whose_server_died_reads_as_temporarily_unavailable(kit_host, store):
    llm = ScriptedLLM([Step(calls=[Call("crash", {})]), Step(calls=[Call("crash", {})])])
    reply = await agent(llm, kit_host, store).reply(ask("crash it"))

    assert "do not call crash again" in seen_by_model(llm)
    assert reply.text.startswith("Sorry")
    assert "crash is temporarily unavailable (" in reply.text
    first, refused = reply.attachments
    assert first.summary.startswith("crash is temporarily unavailable (")
    assert refused.summary.startswith("crash was not called again")
    people = " ".join(people_texts(reply))
    assert "failed:" not in people and "valid arguments" not in people
    assert_no_model_instructions(people_texts(reply))
    llm.assert_complete()


async def test_a_tool_still_rate_limited_after_its_retry_reads_as_temporarily_unavailable(kit_host, store):
    llm = ScriptedLLM([Step(calls=[Call("rate_limited", {})]), Step(text="No data right now.")])
    reply = await agent(llm, kit_host, store).reply(ask("try the limited one"))

    assert "do not call rate_limited again" in seen_by_model(llm)
    (attachment,) = reply.attachments
    assert attachment.summary == "rate_limited is temporarily unavailable (it is rate limited)."
    assert "⚠️ rate_limited is temporarily unavailable (it is rate limited)." in reply.text
    assert_no_model_instructions(people_texts(reply))


async def test_an_unknown_tool_tells_the_model_the_real_names_and_people_only_that_it_does_not_exist(
    loop_host, store
):
    llm = ScriptedLLM([Step(calls=[Call("get_weather", {"city": "x"})]), Step(text="sorry")])
    reply = await agent(llm, loop_host, store).reply(ask("weather?"))

    assert "simulate_geolocation" in seen_by_model(llm)
    (attachment,) = reply.attachments
    assert attachment.summary == "I could not call get_weather: there is no tool by that name."
    assert "simulate_geolocation" not in attachment.content
    assert_no_model_instructions(people_texts(reply))


async def test_a_redelivered_event_shows_the_stored_failure_as_people_read_it(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("broken", {})]), Step(text="It is down.")])
    bot = agent(llm, loop_host, store)
    first = await bot.reply(ask("use the broken tool", event_id="Ev-err"))
    again = await bot.reply(ask("use the broken tool", event_id="Ev-err"))

    assert [a.summary for a in again.attachments] == [a.summary for a in first.attachments]
    assert [a.content for a in again.attachments] == [a.content for a in first.attachments]
    assert_no_model_instructions(people_texts(again))


async def test_the_printed_history_shows_failures_as_people_read_them(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("broken", {})]), Step(calls=[Call("broken", {})])])
    await agent(llm, loop_host, store).reply(ask("use the broken tool"))

    history: list[ChatMessage] = await store.history(KEY)
    lines = format_history(history)
    assert any("broken failed: backend error: the backend is down" in line for line in lines)
    assert_no_model_instructions(lines)

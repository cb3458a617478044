"""A 2026-07-28 server asks in the result of its call: the turn parks in the store, holding no task
and no lock, and goes on when the person answers — in another process, after a restart too.

Real Agent, real SQLite store, the real `asks` server (stdio, and Streamable HTTP for the restart:
a remote server outlives the bot, and its state token with it), a scripted model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent import Agent, AgentConfig
from bot.asks.deferral import DEFERRED_FOR_ANSWER
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.store.sqlite import SQLiteStore
from bot.types import Ask, ConversationKey, Incoming, InputAnswer, InputRequest, TurnEvent
from tests.fakes.answering import answer_question
from tests.fakes.clock import Clock
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.stores import Backend
from tests.test_inputs import PIZZA, asks_server, tool_results

# The store-level behaviour of these turns holds on SQLite and on PostgreSQL alike.
pytestmark = pytest.mark.both_stores

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="500.1")
ASKER = "U1"


def asks_entry(server: ServerConfig) -> dict[str, ServerConfig]:
    # grow_tools has no annotations and would wait for approval; the questions are what is tested.
    return {"asks": server.model_copy(update={"tools": {"grow_tools": ToolOverride(approval="never")}})}


@pytest.fixture(scope="module")
async def modern_host() -> AsyncIterator[MCPHost]:
    async with asks_server("stdio", "2026-07-28") as server, MCPHost(asks_entry(server)) as host:
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        yield host


class Shown:
    """The front end's view: every event, and the questions asked."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    def questions(self) -> list[InputRequest]:
        return [
            e.ask.input
            for e in self.events
            if e.kind == "ask" and e.ask is not None and e.ask.input is not None
        ]

    def ended(self) -> list[str]:
        return [e.message for e in self.events if e.kind == "ask_done"]


def make_agent(llm: ScriptedLLM, host: MCPHost, store: SQLiteStore, clock: Clock | None = None) -> Agent:
    return Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=store,
        approvals=store,
        inputs=store,
        clock=clock or Clock(1_000_000.0),
        config=AgentConfig(input_timeout=60, approval_timeout=60),
    )


def ask(text: str = "order a pizza", event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id=ASKER, event_id=event_id)


async def test_a_question_in_a_result_parks_the_turn_and_the_answer_resumes_it(modern_host, store):
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Ordered.")])
    agent = make_agent(llm, modern_host, store)
    shown = Shown()

    parked = await agent.reply(ask(), shown)
    assert parked.approval is None and "Waiting for your answer" in parked.text
    [question] = shown.questions()
    assert question.tools == ("order_pizza",) and question.form is not None
    assert await store.waiting_in(KEY) is not None, "parked in the store"

    answered = await answer_question(
        agent, question.request_id, ASKER, InputAnswer(action="accept", content=PIZZA)
    )
    assert answered.changed and answered.resume is not None

    resumed = Shown()
    final = await agent.resume(answered.resume, resumed)
    assert final is not None and final.text == "Ordered."
    assert tool_results(llm)["c1"].startswith('accepted: {"crust": "thin"')
    assert await store.waiting_in(KEY) is None
    history = await store.history(KEY)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"], "one whole round"


async def test_a_message_while_a_question_waits_is_answered_after_it_not_blocked(modern_host, store):
    llm = ScriptedLLM(
        [Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Ordered."), Step(text="Hello again.")]
    )
    agent = make_agent(llm, modern_host, store)
    shown = Shown()
    await agent.reply(ask(), shown)

    async with asyncio.timeout(5):  # nothing is held: the thread takes a new message at once
        meanwhile = await agent.reply(ask("hello?", event_id="E2"))
    assert meanwhile.text == DEFERRED_FOR_ANSWER and meanwhile.deferred

    [question] = shown.questions()
    answered = await answer_question(agent, question.request_id, ASKER, InputAnswer(action="decline"))
    final = await agent.resume(answered.resume or "")
    assert final is not None and final.text == "Ordered."
    assert tool_results(llm)["c1"] == "declined"
    later = [reply async for _, reply in agent.deferred_replies(KEY)]
    assert [r.text for r in later] == ["Hello again."]


async def test_an_unanswered_parked_question_expires_and_the_server_gets_cancel(modern_host, store):
    clock = Clock(1_000_000.0)
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Nobody answered.")])
    agent = make_agent(llm, modern_host, store, clock)
    shown = Shown()
    await agent.reply(ask(), shown)
    # The front end says where it showed the question; the process that resumes may be another.
    await agent.ask_posted(Ask.of_input(shown.questions()[0]), "C1/1700000000.000100")

    clock.now += 61
    [due] = await agent.expire_due("slack")
    resumed = Shown()
    final = await agent.resume(due, resumed)
    assert final is not None and final.text == "Nobody answered."
    assert tool_results(llm)["c1"] == "cancelled"
    assert resumed.ended() == ["expired"]
    [ended] = [e.ask.input for e in resumed.events if e.kind == "ask_done" and e.ask is not None]
    assert ended is not None and ended.message_ref == "C1/1700000000.000100"
    [question] = shown.questions()
    late = await answer_question(
        agent, question.request_id, ASKER, InputAnswer(action="accept", content=PIZZA)
    )
    assert not late.changed and late.note is not None


async def test_a_parked_turn_lists_its_open_questions_to_a_new_agent_with_their_forms(modern_host, store):
    """A front end that stopped before the question was answered asks it again from the store."""
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")])])
    shown = Shown()
    await make_agent(llm, modern_host, store).reply(ask(), shown)
    [question] = shown.questions()
    parked_id = await store.waiting_in(KEY)
    assert parked_id is not None

    listed = await make_agent(ScriptedLLM([]), modern_host, store).parked_questions(parked_id)
    assert listed == [question]
    assert listed[0].form is not None and listed[0].form == question.form

    answered = await answer_question(
        make_agent(ScriptedLLM([]), modern_host, store),
        question.request_id,
        ASKER,
        InputAnswer(action="decline"),
    )
    assert answered.resume == parked_id
    assert await make_agent(ScriptedLLM([]), modern_host, store).parked_questions(parked_id) == []


async def test_a_parked_question_is_answered_after_the_bot_restarts(store_backend: Backend):
    """The store and a remote server outlive the bot: a new process takes the answer and goes on."""
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")])])
    async with asks_server("http", "2026-07-28") as server:
        shown = Shown()
        first_store = await store_backend.open()
        try:
            async with MCPHost(asks_entry(server)) as first_host:
                async with asyncio.timeout(20):
                    await first_host.wait_until_ready()
                await make_agent(llm, first_host, first_store).reply(ask(), shown)
        finally:
            await first_store.close()
        [question] = shown.questions()

        after = ScriptedLLM([Step(text="Ordered after the restart.")])
        second_store = await store_backend.open()
        try:
            async with MCPHost(asks_entry(server)) as second_host:
                async with asyncio.timeout(20):
                    await second_host.wait_until_ready()
                agent = make_agent(after, second_host, second_store)
                opened = await agent.open_input(question.request_id, ASKER)
                assert opened.note is None and opened.request is not None, "still answerable"
                answered = await answer_question(
                    agent, question.request_id, ASKER, InputAnswer(action="accept", content=PIZZA)
                )
                assert answered.resume is not None
                final = await agent.resume(answered.resume)
        finally:
            await second_store.close()
    assert final is not None and final.text == "Ordered after the restart."
    assert tool_results(after)["c1"].startswith("accepted: ")


async def test_a_stdio_server_restarted_with_the_bot_takes_the_answer_though_its_state_token_no_longer_opens(
    store_backend: Backend, tmp_path: Path
):
    """A stdio server is the bot's child: a restart restarts it, and the SDK's default sealing key of
    the state it returned with its question is gone with the old process. The answer still reaches
    the tool, once: the call is made again with it and without the state the server refuses."""
    log = tmp_path / "asks.log"
    async with asks_server("stdio", "2026-07-28") as stdio:
        server = stdio.model_copy(update={"env": {"ASKS_LOG": str(log)}})
        llm = ScriptedLLM([Step(calls=[Call("ask_colour", {"label": "door"}, id="c1")])])
        shown = Shown()
        first_store = await store_backend.open()
        try:
            async with MCPHost(asks_entry(server)) as first_host:
                async with asyncio.timeout(20):
                    await first_host.wait_until_ready()
                await make_agent(llm, first_host, first_store).reply(ask("pick a colour"), shown)
        finally:
            await first_store.close()
        [question] = shown.questions()

        after = ScriptedLLM([Step(text="The door will be green.")])
        second_store = await store_backend.open()
        try:
            async with MCPHost(asks_entry(server)) as second_host:  # a new server process
                async with asyncio.timeout(20):
                    await second_host.wait_until_ready()
                agent = make_agent(after, second_host, second_store)
                answered = await answer_question(
                    agent,
                    question.request_id,
                    ASKER,
                    InputAnswer(action="accept", content={"colour": "green"}),
                )
                assert answered.resume is not None
                final = await agent.resume(answered.resume)
        finally:
            await second_store.close()
    assert final is not None and final.text == "The door will be green."
    assert tool_results(after)["c1"] == "door: green"
    received = [json.loads(line)["answer"] for line in log.read_text(encoding="utf-8").splitlines()]
    assert received == [None, {"action": "accept", "content": {"colour": "green"}}], (
        "asked once, answered once"
    )


async def test_a_secret_question_in_a_result_is_declined_without_waiting(modern_host, store):
    llm = ScriptedLLM([Step(calls=[Call("ask_secret", {}, id="c1")]), Step(text="Could not.")])
    shown = Shown()
    reply = await make_agent(llm, modern_host, store).reply(ask("set it up"), shown)
    assert reply.text == "Could not."
    [question] = shown.questions()
    assert question.refused is not None
    assert tool_results(llm)["c1"] == "declined"


async def test_an_older_server_still_asks_while_its_call_waits(store):
    async with asks_server("stdio", "2025-11-25") as server, MCPHost(asks_entry(server)) as host:
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        llm = ScriptedLLM([Step(calls=[Call("ask_colour", {"label": "x"}, id="c1")]), Step(text="Chosen.")])
        agent = make_agent(llm, host, store)
        asked: asyncio.Queue[InputRequest] = asyncio.Queue()

        class Asking(Shown):
            async def __call__(self, event: TurnEvent) -> None:
                await super().__call__(event)
                if event.kind == "ask" and event.ask is not None and event.ask.input is not None:
                    asked.put_nowait(event.ask.input)

        shown = Asking()

        async def answer_when_asked() -> None:
            question = await asked.get()
            assert question.form is not None
            [field] = question.form.fields
            await answer_question(
                agent,
                question.request_id,
                ASKER,
                InputAnswer(action="accept", content={field.name: field.options[0][0]}),
            )

        async with asyncio.timeout(20):
            answering = asyncio.create_task(answer_when_asked())
            reply = await agent.reply(ask("pick"), shown)
            await answering
        assert reply.text == "Chosen." and tool_results(llm)["c1"].startswith("x: ")

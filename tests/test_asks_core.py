"""Asking a person, one way: every approval, question and sign-in is announced as an "ask" event and
listed in `AgentReply.waiting`, and answered with `Agent.answer`, after which the turn goes on.

Real Agent, the real `openai` client against the local model service, real MCP servers (stdio
subprocesses, and the OAuth-protected notes server on loopback), a real store.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.settings import PLATFORMS
from bot.agent import Agent, AgentConfig
from bot.asks.connections import Connections
from bot.asks.inputs import NOT_YOURS as NOT_YOUR_QUESTION
from bot.asks.parking import NOT_YOURS as NOT_YOUR_APPROVAL
from bot.errors import AskError, AskExpired, AskGone
from bot.mcp.auth.sign_ins import SignIns
from bot.mcp.auth.vault import Vault
from bot.mcp.host import MCPHost
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import (
    Approve,
    Ask,
    ConversationKey,
    Decline,
    Incoming,
    LinkOpened,
    SignInFinished,
    Submit,
    TurnEvent,
)
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.test_approvals import host, notes  # noqa: F401  (fixtures: the trust server and its note)
from tests.test_inputs import PIZZA
from tests.test_parked_questions import modern_host  # noqa: F401  (fixture: the asks server)
from tests.test_sign_in import CALLBACK, SECRET, browser_signs_in, notes_entry
from tests.test_sign_in import notes as notes_oauth  # noqa: F401  (fixture: the OAuth notes server)

# The store-level behaviour of these asks holds on SQLite and on PostgreSQL alike.
pytestmark = pytest.mark.both_stores

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="900.1")
ASKER, STRANGER = "U1", "U2"


class Announced:
    """The front end's view of a turn: the asks it was told about."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    def asks(self) -> list[Ask]:
        return [e.ask for e in self.events if e.kind == "ask" and e.ask is not None]


def llm_of(server: FakeLLMServer) -> OpenAILLM:
    return OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)


def agent_for(
    server: FakeLLMServer,
    tools: MCPHost,
    store: SQLiteStore,
    clock: Clock | None = None,
    connections: Connections | None = None,
) -> Agent:
    return Agent(
        llm=llm_of(server),
        host=tools,
        store=store,
        inbox=store,
        approvals=store,
        inputs=store,
        clock=clock or Clock(1_000_000.0),
        config=AgentConfig(approval_timeout=60, input_timeout=60, sign_in_timeout=60),
        connections=connections,
    )


def ask(text: str, user: str = ASKER, event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id=user, event_id=event_id)


async def test_an_approval_is_announced_waited_for_and_answered_through_answer(host, store, notes):  # noqa: F811
    adding = tool_reply(FakeCall(name="append_note", arguments='{"text": "hi"}', id="c1"))
    async with FakeLLMServer([adding, reply("Added.")]) as model:
        await approval_answered(agent_for(model, host, store))
    assert "hi" in notes.read_text(encoding="utf-8"), "the approved call ran"


async def approval_answered(agent: Agent) -> None:
    announced = Announced()

    parked = await agent.reply(ask("add hi"), announced)

    [announced_ask] = announced.asks()
    assert announced_ask.kind == "approval" and announced_ask.person == ASKER
    assert parked.waiting == (announced_ask,)
    assert announced_ask.approval is not None
    assert [c.tool for c in announced_ask.approval.calls] == ["append_note"]

    refused = await agent.answer(announced_ask.id, STRANGER, Approve())
    assert not refused.changed and refused.note == NOT_YOUR_APPROVAL and not refused.resume

    answered = await agent.answer(announced_ask.id, ASKER, Approve())
    assert answered.changed and answered.resume == (announced_ask.id,)
    final = await agent.resume(answered.resume[0])
    assert final is not None and final.text == "Added."


async def test_a_parked_question_is_announced_and_a_form_answered_through_answer(modern_host, store):  # noqa: F811
    async with FakeLLMServer([tool_reply(FakeCall(name="order_pizza", id="c1")), reply("Ordered.")]) as model:
        await question_answered(agent_for(model, modern_host, store))


async def question_answered(agent: Agent) -> None:
    announced = Announced()

    parked = await agent.reply(ask("order a pizza", event_id="E1"), announced)

    [question] = announced.asks()
    assert question.kind == "question" and question.input is not None and question.input.form is not None
    assert parked.waiting == (question,) and parked.approval is None
    replayed = await agent.reply(ask("order a pizza", event_id="E1"))
    assert [(a.kind, a.id) for a in replayed.waiting] == [("question", question.id)], "a replay lists it"

    refused = await agent.answer(question.id, STRANGER, Submit(values=PIZZA))
    assert not refused.changed and refused.note == NOT_YOUR_QUESTION

    wrong = await agent.answer(question.id, ASKER, Submit(values={**PIZZA, "quantity": "many"}))
    assert not wrong.changed and "quantity" in wrong.errors, "a wrong field keeps the form open"

    answered = await agent.answer(question.id, ASKER, Submit(values=PIZZA))
    assert answered.changed and len(answered.resume) == 1
    final = await agent.resume(answered.resume[0])
    assert final is not None and final.text == "Ordered."

    again = await agent.answer(question.id, ASKER, Decline())
    assert not again.changed and again.note == "This was already answered."


async def test_a_link_is_announced_and_opened_through_answer(modern_host, store):  # noqa: F811
    steps = [tool_reply(FakeCall(name="sign_in_elsewhere", id="c1")), reply("Signed in there.")]
    async with FakeLLMServer(steps) as model:
        agent = agent_for(model, modern_host, store)
        announced = Announced()
        parked = await agent.reply(ask("read my calendar"), announced)

        [link] = announced.asks()
        assert link.kind == "link" and link.input is not None and link.input.url is not None
        assert parked.waiting == (link,)

        answered = await agent.answer(link.id, ASKER, LinkOpened())
        [request_id] = answered.resume
        final = await agent.resume(request_id)
    assert final is not None and final.text == "Signed in there."
    assert "url accepted" in model.last_messages()[-1]["content"]


async def test_an_unknown_ask_is_a_typed_error_with_a_plain_message(modern_host, store):  # noqa: F811
    async with FakeLLMServer() as model:
        agent = agent_for(model, modern_host, store)
        with pytest.raises(AskGone) as gone:
            await agent.answer("no-such-ask", ASKER, Approve())
        assert "no longer exists" in gone.value.message
        with pytest.raises(AskGone):
            await agent.answer("no-such-ask", ASKER, Decline())


async def test_an_expired_ask_is_a_typed_error_with_a_plain_message(host, store, notes):  # noqa: F811
    clock = Clock(1_000_000.0)
    adding = tool_reply(FakeCall(name="append_note", arguments='{"text": "late"}', id="c1"))
    async with FakeLLMServer([adding]) as model:
        parked = await agent_for(model, host, store, clock).reply(ask("add late"))
    agent = agent_for(model, host, store, clock)
    [waiting] = parked.waiting

    clock.now += 61
    with pytest.raises(AskExpired) as expired:
        await agent.answer(waiting.id, ASKER, Approve())
    assert "expired" in expired.value.message
    assert "late" not in notes.read_text(encoding="utf-8")


async def test_a_sign_in_is_announced_and_finished_through_answer(notes_oauth, store):  # noqa: F811
    steps = [
        tool_reply(FakeCall(name="connect_notes", id="c1")),
        tool_reply(FakeCall(name="whoami", id="c2")),
        reply("You are alice."),
    ]
    servers = notes_entry(notes_oauth)
    sign_ins = SignIns(servers, store, Vault(SECRET), redirect_uri=CALLBACK)
    oauth_host = MCPHost(servers, sign_ins=sign_ins)
    await oauth_host.start()
    try:
        async with FakeLLMServer(steps) as model:
            agent = agent_for(
                model, oauth_host, store, connections=Connections(sign_ins, oauth_host, PLATFORMS)
            )
            await sign_in_finished(agent)
    finally:
        async with asyncio.timeout(10):
            await oauth_host.aclose()


async def sign_in_finished(agent: Agent) -> None:
    announced = Announced()

    parked = await agent.reply(ask("who am I at notes?"), announced)

    [sign_in] = announced.asks()
    assert sign_in.kind == "sign_in" and sign_in.person == "slack:T1:U1"
    assert parked.waiting == (sign_in,)
    assert sign_in.sign_in is not None
    came_back = await browser_signs_in(sign_in.sign_in, "alice")
    assert came_back["state"] == sign_in.id

    answered = await agent.answer(
        sign_in.id, sign_in.person, SignInFinished(code=came_back.get("code"), iss=came_back.get("iss"))
    )
    [request_id] = answered.resume
    final = await agent.resume(request_id)
    assert final is not None and final.text == "You are alice."

    with pytest.raises(AskError, match="already used or has expired"):
        await agent.answer(sign_in.id, sign_in.person, SignInFinished(code=came_back.get("code")))

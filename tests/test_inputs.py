"""Servers asking people for input mid-call, in the core: the question reaches the person whose
message started the turn, only they can answer it, and the server gets exactly their answer.

A scripted model drives a real Agent against the real `asks` test server (a stdio subprocess, on
both protocol eras) and a real SQLite store; a front end is played by the Progress sink, which
answers through the same `Agent` methods Slack, Discord and the terminal use.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.agent import Agent, AgentConfig
from bot.asks.inputs import ENDED, EXPIRED, NOT_YOURS, STALE_AFTER
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.types import CallContext, ConversationKey, Incoming, InputAnswer, InputRequest, TurnEvent
from tests.conftest import ROOT
from tests.fakes.answering import answer_question
from tests.fakes.clock import Clock
from tests.fakes.scripted import Call, ScriptedLLM, Step

# The store-level behaviour of these turns holds on SQLite and on PostgreSQL alike.
pytestmark = pytest.mark.both_stores

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="100.1")
ASKER, STRANGER = "U1", "U2"

SERVED = [("stdio", "2025-11-25"), ("stdio", "2026-07-28"), ("http", "2025-11-25"), ("http", "2026-07-28")]


@asynccontextmanager
async def asks_server(transport: str, protocol: str) -> AsyncIterator[ServerConfig]:
    """The `asks` server's entry: spawned by the host (stdio), or serving HTTP on a free port."""
    args = ["-m", "tests.mcp_servers.asks", "--protocol", protocol]
    if transport == "stdio":
        yield ServerConfig(trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT))
        return
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, "--http", "0", cwd=str(ROOT), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(20):
            url = (await process.stdout.readline()).decode().strip()
        yield ServerConfig(trustAnnotations=True, url=url, allow_private_network=True)
    finally:
        process.terminate()
        await process.wait()


@pytest.fixture(scope="module", params=SERVED, ids=["-".join(s) for s in SERVED])
async def host(request: pytest.FixtureRequest) -> AsyncIterator[MCPHost]:
    async with (
        asks_server(*request.param) as server,
        MCPHost({"asks": server}, default_timeout=10.0) as started,
    ):
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


Answer = Callable[[Agent, InputRequest], Awaitable[None]]


class Front:
    """Plays a front end: records every event and answers each question with `answer`."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.events: list[TurnEvent] = []
        self.agent: Agent | None = None
        self._answer = answer
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self._changed.clear()
            await self._changed.wait()

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)
        self._changed.set()
        question = event.ask.input if event.kind == "ask" and event.ask is not None else None
        if question is not None and question.refused is None:
            assert self.agent is not None and self._answer is not None
            # Answered from outside the turn's task, as a click arrives.
            self._tasks.append(asyncio.create_task(self._answer(self.agent, question)))

    def of(self, kind: str) -> list[TurnEvent]:
        return [e for e in self.events if e.kind == kind]

    def questions(self) -> list[InputRequest]:
        """The questions and links the turn asked ("ask" events of those kinds)."""
        return [e.ask.input for e in self.of("ask") if e.ask is not None and e.ask.input is not None]


def make_agent(llm: ScriptedLLM, host: MCPHost, store: SQLiteStore, clock: Clock | None = None) -> Agent:
    return Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=store,
        inputs=store,
        clock=clock or Clock(1_000_000.0),
        config=AgentConfig(input_timeout=60),
    )


async def run_turn(agent: Agent, front: Front, text: str = "order a pizza") -> str:
    front.agent = agent
    async with asyncio.timeout(30):
        reply = await agent.reply(Incoming(key=KEY, text=text, user_id=ASKER), front)
    return reply.text


def tool_results(llm: ScriptedLLM) -> dict[str, str]:
    """What each call's server returned, as the model was sent it (the text after the preamble)."""
    return {m.tool_call_id or "": _raw(m.content or "") for m in llm.requests[-1] if m.role == "tool"}


def _raw(content: str) -> str:
    raw = content.split("Its raw result follows:\n", 1)[-1]
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


PIZZA = {
    "name": "Ada",
    "email": "ada@example.com",
    "website": "https://ada.example.com",
    "delivery_date": "2026-12-24",
    "deliver_at": "2026-12-24T18:30:00Z",
    "quantity": "2",
    "tip": "3.5",
    "extra_cheese": "yes",
    "size": "Large",
    "crust": "thin",
    "toppings": ["mushroom", "olive"],
}


async def test_a_form_reaches_the_asker_and_the_server_gets_their_typed_answer(host, store):
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Ordered.")])

    async def fill_in(agent: Agent, request: InputRequest) -> None:
        outcome = await answer_question(
            agent, request.request_id, ASKER, InputAnswer(action="accept", content=PIZZA)
        )
        assert outcome.changed, outcome

    front = Front(fill_in)
    assert await run_turn(make_agent(llm, host, store), front) == "Ordered."

    [request] = front.questions()
    assert request is not None and request.user_id == ASKER and request.tools == ("order_pizza",)
    assert request.form is not None and [f.name for f in request.form.fields][:2] == ["name", "email"]
    result = tool_results(llm)["c1"]
    assert result.startswith("accepted: ")
    sent = json.loads(result.removeprefix("accepted: "))
    assert sent["quantity"] == 2 and sent["tip"] == 3.5 and sent["extra_cheese"] is True
    assert sent["size"] == "large" and sent["toppings"] == ["mushroom", "olive"]
    assert [e.message for e in front.of("ask_done")] == ["accepted"]


async def test_only_the_asker_can_answer_and_a_bad_form_says_what_to_fix_per_field(host, store):
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Done.")])
    seen: dict[str, Any] = {}

    async def try_everything(agent: Agent, request: InputRequest) -> None:
        rid = request.request_id
        seen["stranger_open"] = await agent.open_input(rid, STRANGER)
        seen["stranger"] = await answer_question(
            agent, rid, STRANGER, InputAnswer(action="accept", content=PIZZA)
        )
        seen["bad"] = await answer_question(
            agent,
            rid,
            ASKER,
            InputAnswer(action="accept", content={**PIZZA, "email": "nope", "quantity": "99"}),
        )
        seen["open"] = await agent.open_input(rid, ASKER)
        seen["decline"] = await answer_question(agent, rid, ASKER, InputAnswer(action="decline"))
        seen["again"] = await answer_question(agent, rid, ASKER, InputAnswer(action="accept", content=PIZZA))

    front = Front(try_everything)
    await run_turn(make_agent(llm, host, store), front)

    assert seen["stranger_open"].note == NOT_YOURS and not seen["stranger"].changed
    assert seen["stranger"].note == NOT_YOURS
    assert not seen["bad"].changed and set(seen["bad"].errors) == {"email", "quantity"}
    assert seen["open"].request is not None and seen["open"].note is None
    assert seen["decline"].changed and seen["decline"].status == "declined"
    assert not seen["again"].changed and "already declined" in seen["again"].note
    assert tool_results(llm)["c1"] == "declined"


async def test_two_calls_asking_at_once_each_get_their_own_answer(host, store):
    llm = ScriptedLLM(
        [
            Step(
                calls=[
                    Call("ask_colour", {"label": "left"}, id="c_left"),
                    Call("ask_colour", {"label": "right"}, id="c_right"),
                ]
            ),
            Step(text="Both chosen."),
        ]
    )

    async def by_label(agent: Agent, request: InputRequest) -> None:
        assert request.form is not None
        [field] = request.form.fields
        values = [value for value, _ in field.options]
        pick = values[0] if "left" in request.message else values[-1]
        await answer_question(
            agent, request.request_id, ASKER, InputAnswer(action="accept", content={field.name: pick})
        )

    front = Front(by_label)
    await run_turn(make_agent(llm, host, store), front, "pick two colours")

    assert len(front.questions()) == 2
    results = tool_results(llm)
    first, last = results["c_left"].split(": ")[1], results["c_right"].split(": ")[1]
    assert results["c_left"].startswith("left: ") and results["c_right"].startswith("right: ")
    assert first != last


async def test_a_form_asking_for_a_secret_is_never_shown_and_the_server_gets_decline(host, store):
    llm = ScriptedLLM([Step(calls=[Call("ask_secret", {}, id="c1")]), Step(text="I could not do it.")])
    front = Front()
    await run_turn(make_agent(llm, host, store), front, "set up the integration")

    [asked] = front.questions()
    assert asked.refused is not None and asked.form is None
    assert "API token" in asked.refused or "api_token" in asked.refused
    assert tool_results(llm)["c1"] == "declined"


async def test_an_unanswered_question_expires_and_the_server_gets_cancel(host, store):
    clock = Clock(1_000_000.0)
    llm = ScriptedLLM([Step(calls=[Call("order_pizza", {}, id="c1")]), Step(text="Nobody answered.")])

    async def let_it_expire(agent: Agent, request: InputRequest) -> None:
        clock.now += 61
        late = await answer_question(
            agent, request.request_id, ASKER, InputAnswer(action="accept", content=PIZZA)
        )
        assert not late.changed and late.note == EXPIRED

    front = Front(let_it_expire)
    await run_turn(make_agent(llm, host, store, clock), front)
    assert tool_results(llm)["c1"] == "cancelled"
    assert [e.message for e in front.of("ask_done")] == ["expired"]


async def test_a_question_whose_waiting_process_stopped_is_told_ended(store):
    """A request still open in the store but no longer kept alive belongs to a stopped process."""
    request = InputRequest(
        request_id="r-old",
        key=KEY,
        user_id=ASKER,
        server="asks",
        tools=("order_pizza",),
        message="Your order?",
        mode="form",
        expires_at=2_000_000.0,
    )
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    await store.open_input(request, schema, time.time() - STALE_AFTER - 1)
    agent = make_agent(ScriptedLLM([]), MCPHost({}), store)

    outcome = await agent.open_input("r-old", ASKER)
    assert outcome.note == ENDED
    again = await answer_question(agent, "r-old", ASKER, InputAnswer(action="accept", content={"name": "x"}))
    assert not again.changed and again.note == ENDED


async def test_progress_reaches_the_turn_as_live_status_with_a_fraction(host, store):
    llm = ScriptedLLM(
        [Step(calls=[Call("slow_count", {"n": 3, "pause": 0.05}, id="c1")]), Step(text="Counted.")]
    )
    front = Front()
    await run_turn(make_agent(llm, host, store), front, "count")
    progress = front.of("tool_progress")
    assert progress, "at least the last step is shown"
    assert progress[-1].fraction == 1.0 and progress[-1].message == "step 3 of 3"
    assert progress[-1].tool == "slow_count" and progress[-1].tool_call_id == "c1"
    assert tool_results(llm)["c1"] == "counted 3"


async def test_a_link_shows_its_host_and_once_opened_the_servers_completion_is_shown(host, store, request):
    llm = ScriptedLLM([Step(calls=[Call("sign_in_elsewhere", {}, id="c1")]), Step(text="Signed in.")])

    async def open_it(agent: Agent, request: InputRequest) -> None:
        await answer_question(agent, request.request_id, ASKER, InputAnswer(action="accept"))

    front = Front(open_it)
    await run_turn(make_agent(llm, host, store), front, "sign me in")

    [asked] = front.questions()
    assert asked.mode == "url" and asked.form is None
    assert asked.url == "https://login.example.com/authorize?x=1"
    assert tool_results(llm)["c1"] == "url accepted"

    def done() -> list[str]:
        return [e.message for e in front.of("ask_done")]

    if "2025-11-25" in request.node.callspec.id:
        # Only the older revision has completion notices (one may trail the call's result).
        async with asyncio.timeout(5):
            await front.wait_for(lambda: "completed" in done())
        assert done() == ["accepted", "completed"]
    else:
        assert done() == ["accepted"]


@pytest.mark.parametrize(
    ("most", "timed_out"), [(30.0, False), (0.6, True)], ids=["progress-keeps-it-alive", "absolute-maximum"]
)
async def test_progress_restarts_the_idle_timeout_and_the_absolute_maximum_still_holds(most, timed_out):
    """Idle timeout 0.5 s, a call of about 1 s that reports every 0.2 s."""
    async with (
        asks_server("stdio", "2026-07-28") as server,
        MCPHost({"asks": server}, default_timeout=0.5, max_call_seconds=most) as host,
    ):
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        reports: list[float] = []

        async def report(done: float, total: float | None, message: str | None) -> None:
            reports.append(done)

        context = CallContext(tool="slow_count", owner="o", report=report)
        started = time.monotonic()
        result = await host.call_tool("slow_count", {"n": 5, "pause": 0.2}, context)
        took = time.monotonic() - started
    if timed_out:
        assert result.is_error and result.error_kind == "timeout" and "0.6 s" in result.content
        assert took > 0.55 and len(reports) < 5, "the maximum ended it before the count did"
    else:
        assert not result.is_error and result.content == "counted 5", result.content
        assert took > 0.5 and reports == [1, 2, 3, 4, 5]

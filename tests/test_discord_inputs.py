"""Servers asking people for input on Discord: real discord.py against the fake Discord (gateway and
REST, modals included), the real Agent and SQLite store, the real `asks` MCP server over stdio, and
the real `openai` client against a scripted model service. The server echoes exactly what it was
given, so each test sees what really reached it; the fake records what Discord received.

The end-to-end tests run on both protocol eras of the server: on 2025-11-25 it asks while its call
waits (the turn waits with it: "live"), on 2026-07-28 it asks in its call's result and the turn
parks until the answer resumes it ("parked"; its answer then comes in the conversation's thread).
People see the same request message and answer it the same way."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from adapters.discord.app import NerveDiscordBot
from adapters.discord.client import LONG_LIVED
from adapters.discord.delivery import CUSTOM_ID_LIMIT
from adapters.discord.input_message import TEMPLATE, InputClick, custom_id, request_text
from adapters.discord.input_modal import InputModal, steps_of
from adapters.discord.live import LiveView
from bot.agent import Agent, AgentConfig
from bot.asks.inputs import NOT_YOURS
from bot.forms import form_from_schema
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import Ask, ConversationKey, InputRequest, TurnEvent
from tests.answering import decide
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.discord_api import FakeDiscord, FakeUser, Recorded, running_bot
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.mcp_servers.asks import LOGIN_URL, PIZZA_FORM
from tests.test_discord_bot import WatchedInbox
from tests.test_inputs import asks_server

CALLBACK = r"/interactions/\d+/[^/]+/callback"
THREADS = r"/channels/\d+/messages/\d+/threads"
# Discord drops a response after 3 s (`bench/discord_bench.py` holds that figure). Each response
# here is sent first thing in its handler, so this bound, generous for a busy machine, only catches
# one that waited for something slow; where that could be the turn, the test holds the turn (the
# model's answer stalls) and sees the acknowledgement come meanwhile.
ACK_GIVE_UP = 15.0
# A stall far past every wait of these tests: only `unstall()` ends it.
HELD = 600.0

PIZZA_TITLES = [
    ["Your name", "Email", "Website", "Delivery date", "Deliver at"],
    ["How many", "Tip (%)", "Extra cheese", "Size", "Crust"],
    ["Toppings"],
]


LIVE, PARKED = "2025-11-25", "2026-07-28"

T = TypeVar("T")


@asynccontextmanager
async def asks_host(protocol: str) -> AsyncIterator[MCPHost]:
    """The `asks` server on one protocol era. `chatty` waits for approval, so a test can have a
    turn resumed after an approval ask a question."""
    args = ["-m", "tests.mcp_servers.asks", "--protocol", protocol]
    tools = {"chatty": ToolOverride(approval="always")}
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT), tools=tools
    )
    async with MCPHost({"asks": server}, default_timeout=10.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


@pytest.fixture(scope="module")
async def host() -> AsyncIterator[MCPHost]:
    """The server on 2026-07-28: a question in its call's result parks the turn."""
    async with asks_host(PARKED) as started:
        yield started


@pytest.fixture(scope="module")
async def legacy_host() -> AsyncIterator[MCPHost]:
    """The server on the handshake era: it asks while its call waits, and a link's server reports
    when it is done with it."""
    async with asks_host(LIVE) as started:
        yield started


@dataclass(frozen=True, slots=True)
class Asks:
    host: MCPHost
    # The server asks in its call's result and the turn parks (else it asks while its call waits).
    parked: bool

    def answers_in(self, channel_id: int, thread_id: int) -> int:
        """Where the turn's answer goes: a waiting turn answers where it runs, a parked one is
        resumed later and answers in the conversation's thread."""
        return thread_id if self.parked else channel_id


@pytest.fixture(params=[LIVE, PARKED], ids=["live-2025-11-25", "parked-2026-07-28"])
def asks(request: pytest.FixtureRequest) -> Asks:
    """Each era's server in turn (both started once per module)."""
    parked = request.param == PARKED
    return Asks(host=request.getfixturevalue("host" if parked else "legacy_host"), parked=parked)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture(autouse=True)
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The expiry sweep also resumes parked turns nobody resumed: kept away here, so each answer
    must resume its turn itself (a test of expiry sweeps often)."""
    monkeypatch.setattr(NerveDiscordBot, "approval_sweep_every", 3600.0)


async def asking_agent(
    llm_server: FakeLLMServer,
    store: SQLiteStore,
    host: MCPHost,
    clock: Clock | None = None,
    inbox: Any = None,
) -> tuple[Agent, OpenAILLM]:
    llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
    agent = Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=inbox or store,
        approvals=store,
        inputs=store,
        config=AgentConfig(input_timeout=120, approval_timeout=120),
        clock=clock or time.time,
    )
    return agent, llm


def calls(name: str, arguments: dict[str, Any] | None = None, call_id: str = "c1") -> Any:
    return tool_reply(FakeCall(name=name, arguments=json.dumps(arguments or {}), id=call_id))


# --- reading what Discord received ---------------------------------------------------------------------


def one(found: Sequence[T], what: str, shown: Callable[[T], object] = repr) -> T:
    """The only item of `found`; else a failure that lists what was found instead."""
    assert len(found) == 1, f"expected one {what}, found {len(found)}: {[shown(f) for f in found]}"
    return found[0]


def as_sent(request: Recorded) -> object:
    """A request the fake received, as a failure shows it."""
    return (request.method, request.path, request.status, request.body())


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The message's buttons by label."""
    return {c["label"]: c for row in message.get("components") or [] for c in row.get("components", [])}


def is_request(message: dict[str, Any]) -> bool:
    return "asks" in (message.get("content") or "") and (
        any(str(b.get("custom_id", "")).startswith("nerve:in:") for b in buttons(message).values())
        or "🔒" in (message.get("content") or "")
    )


async def request_in(fake: FakeDiscord, channel_id: int) -> dict[str, Any]:
    """The request message the bot posted in the channel (waited for, bounded)."""

    def found() -> list[dict[str, Any]]:
        return [m for m in fake.bot_messages(channel_id) if is_request(m)]

    await fake.wait_until(lambda: bool(found()))
    return found()[-1]


def request_of(custom_id: str) -> str:
    """The request id a request message's button carries."""
    match = re.fullmatch(TEMPLATE, custom_id)
    assert match is not None, custom_id
    return match["request"]


async def settled(store: SQLiteStore, request_id: str) -> None:
    """Until the stored question is no longer open (bounded: a stopping turn settles it)."""
    async with asyncio.timeout(30):
        while True:
            stored = await store.stored_input(request_id)
            if stored is None or stored.status != "open":
                return
            await asyncio.sleep(0.02)


async def answered(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    """The bot's first response to an interaction (its callback body), checked to come in time."""
    sent_at = asyncio.get_running_loop().time()
    path = re.escape(f"/interactions/{interaction['id']}/{interaction['token']}/callback")
    responses = await fake.wait_for("POST", path, within=ACK_GIVE_UP)
    callback = one(responses, f"response to interaction {interaction['id']}", as_sent)
    assert callback.at - sent_at < ACK_GIVE_UP
    assert callback.status == 200, "Discord took the response (a modal within its limits)"
    body: dict[str, Any] = callback.body()
    return body


async def click(fake: FakeDiscord, user: FakeUser, message: dict[str, Any], label: str) -> dict[str, Any]:
    return await fake.click(user, message, buttons(message)[label]["custom_id"])


async def ephemeral_reply(fake: FakeDiscord, interaction: dict[str, Any]) -> dict[str, Any]:
    """The message only the user sees: the interaction's response or, after a deferral, its follow-up."""
    body = await answered(fake, interaction)
    if body["type"] == 4:
        assert body["data"]["flags"] & 64, "only the user sees it"
        message = fake.messages[fake._interactions[interaction["token"]]["original"]]
        return message
    assert body["type"] == 6, body
    follow_ups = await fake.wait_for("POST", rf"/webhooks/\d+/{re.escape(interaction['token'])}")
    note = one(follow_ups, "follow-up", as_sent)
    assert note.body()["flags"] & 64, "only the user sees it"
    found = [m for m in fake.messages.values() if m.get("interaction_token") == interaction["token"]]
    return found[-1]


async def open_modal(
    fake: FakeDiscord, user: FakeUser, message: dict[str, Any], label: str
) -> dict[str, Any]:
    """Click a button that opens a modal; the click itself is answered with the modal (type 9)."""
    interaction = await click(fake, user, message, label)
    body = await answered(fake, interaction)
    assert body["type"] == 9, f"a modal, not {body}"
    return interaction


def fields(modal: dict[str, Any]) -> list[dict[str, Any]]:
    """The modal's fields: each label's text with its input."""
    return [{"title": c["label"], **c["component"]} for c in modal["components"]]


def ids(modal: dict[str, Any]) -> dict[str, str]:
    """Field title → the input's custom_id."""
    return {f["title"]: f["custom_id"] for f in fields(modal)}


def option(modal: dict[str, Any], title: str, label: str) -> str:
    found = one([f for f in fields(modal) if f["title"] == title], f"field titled {title!r}")
    value: str = next(o["value"] for o in found["options"] if o["label"] == label)
    return value


def tool_result(llm: FakeLLMServer, call_id: str | None = None) -> str:
    """What the tool's server returned (for the call `call_id`, else the first), as the model was
    sent it."""
    results = [m for m in llm.last_messages() if m["role"] == "tool"]
    content = next(m for m in results if call_id in (None, m.get("tool_call_id")))["content"]
    raw = content.split("Its raw result follows:\n", 1)[-1]
    try:
        value = json.loads(raw)
    except ValueError:
        return str(raw)
    return value if isinstance(value, str) else str(raw)


async def final_edit(fake: FakeDiscord, message: dict[str, Any], words: str) -> dict[str, Any]:
    """The edit of a request message that says how it ended (waited for, bounded)."""
    path = rf"/channels/{message['channel_id']}/messages/{message['id']}"

    def found() -> list[Any]:
        return [e for e in fake.find("PATCH", path) if words in (e.body().get("content") or "")]

    await fake.wait_until(lambda: bool(found()))
    body: dict[str, Any] = found()[-1].body()
    return body


def answers_saying(fake: FakeDiscord, words: str) -> list[dict[str, Any]]:
    """The bot's messages, anywhere, that begin with `words`."""
    return [m for m in fake.bot_messages() if (m.get("content") or "").startswith(words)]


async def idle(bot: NerveDiscordBot) -> None:
    """Wait (bounded) until everything the bot started has finished."""
    async with asyncio.timeout(20):
        while busy := [t for t in bot._tasks if t.get_name() not in LONG_LIVED]:
            await asyncio.wait(busy)


async def answered_once(bot: NerveDiscordBot, fake: FakeDiscord, words: str) -> dict[str, Any]:
    """The turn's answer, where the turn runs (a parked turn's in the conversation's thread or DM),
    waited for (bounded); once everything the bot started has finished, it was posted once."""
    await fake.wait_until(lambda: bool(answers_saying(fake, words)), within=20)
    await idle(bot)
    return one(answers_saying(fake, words), f"answer saying {words!r}")


# --- a whole form, in three steps ----------------------------------------------------------------------


async def test_a_mention_whose_tool_asks_for_a_form_is_filled_in_three_modals_and_the_server_gets_it(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    held = reply("Your pizza is on its way.", stall_after=0, stall=HELD)  # until the ack is seen
    async with FakeLLMServer([calls("order_pizza"), held]) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            mention = await fake.user_says(ada, "order me a pizza", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            content = request["content"]
            assert "`asks` asks for input" in content and "`order_pizza`" in content
            assert "> What pizza would you like?" in content
            assert f"Only <@{ada.id}> (who asked) can answer" in content
            assert re.search(r"<t:\d+:R>", content) and "opens in 3 steps" in content
            assert set(buttons(request)) == {"Fill in", "Decline"}
            assert all(
                len(b["custom_id"]) <= CUSTOM_ID_LIMIT and re.fullmatch(TEMPLATE, b["custom_id"])
                for b in buttons(request).values()
            )
            posted = fake.find("POST", rf"/channels/{fake.channel_id}/messages")
            sent = next(p.body() for p in posted if "asks for input" in (p.body().get("content") or ""))
            assert int(sent["message_reference"]["message_id"]) == int(mention["id"]), "in the turn's place"
            assert sent["allowed_mentions"]["parse"] == []

            first = await open_modal(fake, ada, request, "Fill in")
            modal = fake.modal_for(first)
            assert modal is not None and len(modal["title"]) <= 45
            assert modal["title"] == "What pizza would you like? (1/3)"
            assert [f["title"] for f in fields(modal)] == PIZZA_TITLES[0]
            name = fields(modal)[0]
            assert name["type"] == 4 and name["required"] and name["min_length"] == 2
            assert name["placeholder"] == "text, at least 2 characters"
            assert fields(modal)[2]["placeholder"] == "a link like https://example.com"
            assert not fields(modal)[2]["required"], "only name and email are required"
            typed = {
                "Your name": "Ada",
                "Email": "ada@example.com",
                "Website": "https://ada.example.com",
                "Delivery date": "2026-12-24",
                "Deliver at": "2026-12-24T18:30:00Z",
            }
            submit = await fake.submit_modal(ada, first, {ids(modal)[k]: v for k, v in typed.items()})
            step1 = await ephemeral_reply(fake, submit)
            assert "Step 1 of 3 done" in step1["content"] and set(buttons(step1)) == {"Continue"}

            second = await open_modal(fake, ada, step1, "Continue")
            modal = fake.modal_for(second)
            assert modal is not None and modal["title"].endswith("(2/3)")
            assert [f["title"] for f in fields(modal)] == PIZZA_TITLES[1]
            by_title = {f["title"]: f for f in fields(modal)}
            assert by_title["How many"]["value"] == "1", "the server's default, pre-filled"
            assert by_title["How many"]["placeholder"] == "a whole number from 1 to 10"
            assert by_title["Extra cheese"]["type"] == 3
            assert [o["label"] for o in by_title["Extra cheese"]["options"] if o.get("default")] == ["No"]
            assert [o["label"] for o in by_title["Size"]["options"]] == ["Small", "Medium", "Large"]
            assert [o["label"] for o in by_title["Size"]["options"] if o.get("default")] == ["Medium"]
            assert [o["label"] for o in by_title["Crust"]["options"]] == ["Thin crust", "Thick crust"]
            assert len(modal["components"]) == 5
            changes = {
                ids(modal)["How many"]: "2",
                ids(modal)["Tip (%)"]: "3.5",
                ids(modal)["Extra cheese"]: [option(modal, "Extra cheese", "Yes")],
                ids(modal)["Crust"]: [option(modal, "Crust", "Thin crust")],
            }
            submit = await fake.submit_modal(ada, second, changes)
            step2 = await ephemeral_reply(fake, submit)
            assert "Step 2 of 3 done" in step2["content"]

            third = await open_modal(fake, ada, step2, "Continue")
            modal = fake.modal_for(third)
            assert modal is not None and [f["title"] for f in fields(modal)] == PIZZA_TITLES[2]
            toppings = one(fields(modal), "field")
            assert toppings["max_values"] == 3 and toppings["min_values"] == 0
            picked = [option(modal, "Toppings", "Mushrooms"), option(modal, "Toppings", "Olives")]
            last = await fake.submit_modal(ada, third, {toppings["custom_id"]: picked})
            assert (await answered(fake, last))["type"] == 6, "acknowledged at once"
            assert not answers_saying(fake, "Your pizza is on its way."), "while the turn is held"
            server.unstall()

            answer = await answered_once(bot, fake, "Your pizza is on its way.")
            assert int(answer["channel_id"]) == asks.answers_in(fake.channel_id, int(mention["id"]))
            if asks.parked:
                waited = one(
                    answers_saying(fake, "Waiting for your answer to what order_pizza asked."), "message"
                )
                assert int(waited["channel_id"]) == fake.channel_id, "the turn said why it stopped"
            expected = {
                "crust": "thin",
                "deliver_at": "2026-12-24T18:30:00Z",
                "delivery_date": "2026-12-24",
                "email": "ada@example.com",
                "extra_cheese": True,
                "name": "Ada",
                "quantity": 2,
                "size": "medium",
                "tip": 3.5,
                "toppings": ["mushroom", "olive"],
                "website": "https://ada.example.com",
            }
            assert tool_result(server) == f"accepted: {json.dumps(expected, sort_keys=True)}"
            done = await final_edit(fake, request, "Answered")
            assert done["components"] == [], "the buttons go once it is answered"
            assert "What pizza would you like?" in done["content"]
            server.assert_complete()
        await llm.aclose()


# --- who may answer, what is wrong, declining ---------------------------------------------------------


async def test_someone_else_clicking_fill_in_gets_a_note_and_no_modal_while_the_asker_picks_a_colour(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    script = [calls("ask_colour", {"label": "door"}), reply("Painted.")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada, eve = fake.user("ada"), fake.user("eve")
            mention = await fake.user_says(ada, "paint the door", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            assert "opens in" not in request["content"], "one field: one modal"

            stranger = await click(fake, eve, request, "Fill in")
            note = await ephemeral_reply(fake, stranger)
            assert note["content"] == NOT_YOURS
            assert fake.modal_for(stranger) is None and len(fake.modals) == 0

            opened = await open_modal(fake, ada, request, "Fill in")
            modal = fake.modal_for(opened)
            assert modal is not None and modal["title"] == "Pick a colour for door"
            colour = one(fields(modal), "field")
            assert colour["type"] == 3 and colour["min_values"] == 1 and colour["max_values"] == 1
            await fake.submit_modal(ada, opened, {colour["custom_id"]: [option(modal, "Colour", "blue")]})
            answer = await answered_once(bot, fake, "Painted.")
            assert int(answer["channel_id"]) == asks.answers_in(fake.channel_id, int(mention["id"]))
            assert tool_result(server) == "door: blue"
        await llm.aclose()


async def test_an_invalid_value_comes_back_with_each_problem_and_fix_reopens_the_form_with_what_was_typed(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    script = [calls("order_pizza"), reply("No pizza then.")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            await fake.user_says(ada, "order me a pizza", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            first = await open_modal(fake, ada, request, "Fill in")
            modal = fake.modal_for(first)
            assert modal is not None
            typed = {"Your name": "Ada", "Email": "ada at example", "Delivery date": "24.12.2026"}
            submit = await fake.submit_modal(ada, first, {ids(modal)[k]: v for k, v in typed.items()})
            errors = await ephemeral_reply(fake, submit)
            assert "**Email**: Enter an email address, like name@example.com." in errors["content"]
            assert "**Delivery date**: Enter a date as YYYY-MM-DD" in errors["content"]
            assert "Your name" not in errors["content"]
            assert set(buttons(errors)) == {"Fix"}

            fix = await open_modal(fake, ada, errors, "Fix")
            again = fake.modal_for(fix)
            assert again is not None and again["title"].endswith("(1/3)")
            shown = {f["title"]: f.get("value") for f in fields(again)}
            assert shown["Your name"] == "Ada" and shown["Email"] == "ada at example"
            assert shown["Delivery date"] == "24.12.2026", "pre-filled with what was typed"

            declined = await click(fake, ada, request, "Decline")
            assert (await answered(fake, declined))["type"] == 6
            await answered_once(bot, fake, "No pizza then.")
            assert tool_result(server) == "declined"
            done = await final_edit(fake, request, "Declined")
            assert done["components"] == []
        await llm.aclose()


async def test_a_secret_is_never_asked_for_the_message_is_a_note_and_the_server_is_told_declined(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    async with FakeLLMServer([calls("ask_secret"), reply("I could not get a token.")]) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            await fake.user_dms(ada, "use my token")
            dm = fake.dm_channels[ada.id]
            request = await request_in(fake, dm)
            assert "🔒" in request["content"] and "api\\_token" in request["content"]
            assert request["components"] == [], "a note only: nothing to fill in"
            answer = await answered_once(bot, fake, "I could not get a token.")
            assert int(answer["channel_id"]) == dm
            assert tool_result(server) == "declined"
        await llm.aclose()


async def test_a_link_shows_its_host_and_open_gives_the_asker_a_link_button_and_tells_the_server_accept(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    async with FakeLLMServer([calls("sign_in_elsewhere"), reply("Signed in.")]) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada, eve = fake.user("ada"), fake.user("eve")
            await fake.user_says(ada, "read my calendar", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            assert "\n## `login.example.com`\n" in request["content"], "the host, large, on its own line"
            assert "> Sign in to Example to let me read your calendar" in request["content"]
            assert set(buttons(request)) == {"Open login.example.com", "Decline"}
            assert LOGIN_URL not in json.dumps(request), "the link itself goes only to the asker"

            stranger = await click(fake, eve, request, "Open login.example.com")
            assert (await ephemeral_reply(fake, stranger))["content"] == NOT_YOURS

            opened = await click(fake, ada, request, "Open login.example.com")
            link = await ephemeral_reply(fake, opened)
            (button,) = buttons(link).values()
            assert button["style"] == 5 and button["url"] == LOGIN_URL
            assert "login.example.com" in link["content"]
            await answered_once(bot, fake, "Signed in.")
            assert tool_result(server) == "url accepted"
            done = await final_edit(fake, request, "Opened")
            assert done["components"] == []
        await llm.aclose()


async def test_an_ask_shows_the_request_in_its_channel_replying_to_the_deferred_answer(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    script = [calls("ask_colour", {"label": "fence"}), reply("Fence done.")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            asked = await fake.slash(ada, "ask", {"question": "paint the fence"}, channel_id=fake.channel_id)
            (defer,) = await fake.wait_for("POST", CALLBACK)
            assert defer.json["type"] == 5
            request = await request_in(fake, fake.channel_id)
            answer_id = fake._interactions[asked["token"]]["original"]
            assert int(request["message_reference"]["message_id"]) == answer_id

            declined = await click(fake, ada, request, "Decline")
            await answered(fake, declined)
            answer = await answered_once(bot, fake, "Fence done.")
            if asks.parked:
                assert int(answer["channel_id"]) == answer_id, "in the thread on the deferred answer"
            else:
                assert int(answer["id"]) == answer_id, "the deferred answer itself"
            assert tool_result(server) == "fence: declined"
            await final_edit(fake, request, "Declined")
        await llm.aclose()


async def test_a_form_opened_before_a_restart_says_so_when_submitted(
    fake: FakeDiscord, store: SQLiteStore, legacy_host: MCPHost
) -> None:
    """A live question ends with its turn; a parked one outlives the restart (its own test)."""
    script = [calls("ask_colour", {"label": "gate"}), reply("unused")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, legacy_host)
        ada = fake.user("ada")
        async with running_bot(fake, agent):
            await fake.user_says(ada, "paint the gate", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            opened = await open_modal(fake, ada, request, "Fill in")
        # A real restart starts once the old process is gone; here the stopped turn's server is told
        # to cancel and the question is settled as its call ends, so wait for that, not for a time.
        await settled(store, request_of(buttons(request)["Fill in"]["custom_id"]))
        async with running_bot(fake, agent):
            modal = fake.modal_for(opened)
            assert modal is not None
            colour = one(fields(modal), "field")
            submit = await fake.submit_modal(ada, opened, {colour["custom_id"]: ["0"]})
            note = await ephemeral_reply(fake, submit)
            assert note["content"] == "This was cancelled.", "the stopped turn cancelled its question"

            edits = len(fake.find("PATCH", rf"/channels/{fake.channel_id}/messages/{request['id']}"))
            again = await click(fake, ada, request, "Fill in")
            assert (await ephemeral_reply(fake, again))["content"] == "This was cancelled."
            assert fake.modal_for(again) is None
            tidied = await fake.wait_for(
                "PATCH", rf"/channels/{fake.channel_id}/messages/{request['id']}", count=edits + 1
            )
            assert tidied[-1].body()["components"] == [], (
                "a click on a finished request takes its buttons off"
            )
            assert "Cancelled" in tidied[-1].body()["content"]
        await llm.aclose()


async def test_a_request_nobody_answers_expires_its_message_says_so_and_the_server_is_told_cancel(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live question expires in its waiting call; a parked one in the expiry sweep, which
    resumes its turn."""
    monkeypatch.setattr(NerveDiscordBot, "approval_sweep_every", 0.05)
    clock = Clock(time.time())
    script = [calls("ask_colour", {"label": "roof"}), reply("Nobody picked a colour.")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, asks.host, clock)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            mention = await fake.user_says(ada, "paint the roof", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            clock.now += 121
            done = await final_edit(fake, request, "Expired")
            assert done["components"] == []
            answer = await answered_once(bot, fake, "Nobody picked a colour.")
            assert int(answer["channel_id"]) == asks.answers_in(fake.channel_id, int(mention["id"]))
            assert tool_result(server) == "roof: cancelled"
        await llm.aclose()


# --- parked turns: a question that outlives its process, expires, or comes after an approval ----------


@pytest.fixture(scope="module")
async def remote() -> AsyncIterator[ServerConfig]:
    """The `asks` server on 2026-07-28 over HTTP: it outlives each run of the bot, as a remote
    server does."""
    async with asks_server("http", PARKED) as entry:
        yield entry


@asynccontextmanager
async def one_run(
    fake: FakeDiscord,
    database: Path,
    entry: ServerConfig,
    llm_server: FakeLLMServer,
    clock: Clock | None = None,
) -> AsyncIterator[tuple[NerveDiscordBot, WatchedInbox]]:
    """One run of the bot on the database file (as after a start): its own store, host and client;
    the inbox tells when a delivery was answered."""
    store = await SQLiteStore.open(database)
    inbox = WatchedInbox(store)
    try:
        async with MCPHost({"asks": entry}, default_timeout=10.0) as started:
            async with asyncio.timeout(20):
                await started.wait_until_ready()
            agent, llm = await asking_agent(llm_server, store, started, clock, inbox=inbox)
            try:
                async with running_bot(fake, agent) as bot:
                    yield bot, inbox
            finally:
                await llm.aclose()
    finally:
        await store.close()


async def test_a_parked_question_is_answered_after_the_bot_restarts_and_its_answer_lands_once(
    fake: FakeDiscord, tmp_path: Path, remote: ServerConfig
) -> None:
    """The store and a remote server outlive the bot: the new client's Fill in (routed by its
    custom_id) opens the form, and its submit resumes the turn."""
    database = tmp_path / "restart.db"
    ada = fake.user("ada")
    held = reply("Painted after the restart.", stall_after=0, stall=HELD)  # until the ack is seen
    script = [calls("ask_colour", {"label": "gate"}), held]
    async with FakeLLMServer(script) as server:
        async with one_run(fake, database, remote, server) as (_, inbox):
            mention = await fake.user_says(ada, "paint the gate", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            before = await open_modal(fake, ada, request, "Fill in")
            async with asyncio.timeout(10):
                await inbox.finished.wait()
        assert not fake.connected and len(server.requests) == 1, "parked: nothing waits for the answer"

        async with one_run(fake, database, remote, server) as (bot, _):
            old = fake.modal_for(before)
            assert old is not None
            old_colour = one(fields(old), "field")
            stale = await fake.submit_modal(ada, before, {old_colour["custom_id"]: ["2"]})
            note = await ephemeral_reply(fake, stale)
            assert "restarted" in note["content"] and set(buttons(note)) == {"Fill in"}

            opened = await open_modal(fake, ada, request, "Fill in")
            modal = fake.modal_for(opened)
            assert modal is not None
            colour = one(fields(modal), "field")
            submit = await fake.submit_modal(
                ada, opened, {colour["custom_id"]: [option(modal, "Colour", "blue")]}
            )
            assert (await answered(fake, submit))["type"] == 6, "acknowledged before the turn goes on"
            assert not answers_saying(fake, "Painted after the restart."), "while the turn is held"
            server.unstall()
            answer = await answered_once(bot, fake, "Painted after the restart.")
            assert int(answer["channel_id"]) == int(mention["id"]), "in the conversation's thread"
            assert tool_result(server) == "gate: blue"
            done = await final_edit(fake, request, "Answered")
            assert done["components"] == [], "the message posted before the restart is updated"
        server.assert_complete()


async def test_a_parked_question_nobody_answers_expires_after_the_bot_restarts_on_its_first_message(
    fake: FakeDiscord, tmp_path: Path, remote: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client that posted the question is gone; the new client's sweep ends it: the message
    posted before the restart loses its buttons and says it expired, and the answer lands once."""
    monkeypatch.setattr(NerveDiscordBot, "approval_sweep_every", 0.05)
    clock = Clock(time.time())
    database = tmp_path / "expiry.db"
    ada = fake.user("ada")
    script = [calls("ask_colour", {"label": "shed"}), reply("Nobody picked a colour for the shed.")]
    async with FakeLLMServer(script) as server:
        async with one_run(fake, database, remote, server, clock) as (bot, inbox):
            mention = await fake.user_says(ada, "paint the shed", mention_bot=True)
            request = await request_in(fake, fake.channel_id)
            async with asyncio.timeout(10):
                await inbox.finished.wait()
            await idle(bot)
        assert set(buttons(request)) == {"Fill in", "Decline"}

        async with one_run(fake, database, remote, server, clock) as (bot, _):
            clock.now += 121
            done = await final_edit(fake, request, "Expired")
            assert done["components"] == [], "the message posted before the restart is updated"
            answer = await answered_once(bot, fake, "Nobody picked a colour for the shed.")
            assert int(answer["channel_id"]) == int(mention["id"]), "in the conversation's thread"
            assert tool_result(server) == "shed: cancelled"
        server.assert_complete()


async def test_a_question_asked_by_a_turn_resumed_after_an_approval_is_shown_and_answered(
    fake: FakeDiscord, store: SQLiteStore, asks: Asks
) -> None:
    script = [
        calls("chatty", call_id="c1"),
        calls("ask_colour", {"label": "shed"}, call_id="c2"),
        reply("Painted the shed."),
    ]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, asks.host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            mention = await fake.user_says(ada, "tidy up, then paint the shed", mention_bot=True)
            thread = int(mention["id"])

            def approvals() -> list[dict[str, Any]]:
                return [
                    m
                    for m in fake.bot_messages(fake.channel_id)
                    if any(str(b.get("custom_id")).startswith("nerve:ap:") for b in buttons(m).values())
                ]

            await fake.wait_until(lambda: bool(approvals()))
            await fake.wait_for("POST", THREADS)
            await click(fake, ada, approvals()[0], "Approve")

            request = await request_in(fake, thread)
            assert "Pick a colour for shed" in request["content"], "shown in the conversation's thread"
            opened = await open_modal(fake, ada, request, "Fill in")
            modal = fake.modal_for(opened)
            assert modal is not None
            colour = one(fields(modal), "field")
            await fake.submit_modal(ada, opened, {colour["custom_id"]: [option(modal, "Colour", "green")]})
            answer = await answered_once(bot, fake, "Painted the shed.")
            assert int(answer["channel_id"]) == thread
            assert tool_result(server, "c1") == "logged" and tool_result(server, "c2") == "shed: green"
            await final_edit(fake, request, "Answered")
            if asks.parked:
                waited = one(
                    answers_saying(fake, "Waiting for your answer to what ask_colour asked."), "message"
                )
                assert int(waited["channel_id"]) == thread
            server.assert_complete()
        await llm.aclose()


async def test_a_turn_approved_while_the_bot_was_down_is_resumed_at_start_up_and_its_question_shown(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost
) -> None:
    script = [
        calls("chatty", call_id="c1"),
        calls("ask_colour", {"label": "barn"}, call_id="c2"),
        reply("Painted the barn."),
    ]
    async with FakeLLMServer(script) as server:
        inbox = WatchedInbox(store)
        agent, llm = await asking_agent(server, store, host, inbox=inbox)
        ada = fake.user("ada")
        async with running_bot(fake, agent):
            mention = await fake.user_says(ada, "tidy up, then paint the barn", mention_bot=True)
            async with asyncio.timeout(10):
                await inbox.finished.wait()
        # Approved, then the process stopped before it went on with the turn.
        request_id = await store.waiting_in(agent_key(mention))
        assert request_id is not None
        assert (await decide(agent, request_id, str(ada.id), approve=True)).ready

        async with running_bot(fake, agent) as bot:
            thread = int(mention["id"])
            request = await request_in(fake, thread)
            assert "Pick a colour for barn" in request["content"]
            await click(fake, ada, request, "Decline")
            answer = await answered_once(bot, fake, "Painted the barn.")
            assert int(answer["channel_id"]) == thread
            assert tool_result(server, "c2") == "barn: declined"
            await final_edit(fake, request, "Declined")
        await llm.aclose()


def agent_key(mention: dict[str, Any]) -> ConversationKey:
    """The conversation a mention in a guild channel starts (its thread takes the mention's id)."""
    return ConversationKey(
        platform="discord", workspace=mention["guild_id"], channel=mention["channel_id"], thread=mention["id"]
    )


# --- progress ------------------------------------------------------------------------------------------


async def test_a_tools_progress_shows_in_the_live_message_with_its_percentage(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NerveDiscordBot, "live_edit_every", 0.02)
    script = [calls("slow_count", {"n": 3, "pause": 0.4}), reply("Counted to three.")]
    async with FakeLLMServer(script) as server:
        agent, llm = await asking_agent(server, store, host)
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            await fake.user_says(ada, "count to three", mention_bot=True)

            def shown() -> list[str]:
                sent = fake.find("POST", rf"/channels/{fake.channel_id}/messages") + fake.find(
                    "PATCH", rf"/channels/{fake.channel_id}/messages/\d+"
                )
                return [str(r.body().get("content") or "") for r in sent]

            await fake.wait_until(lambda: any("step 1 of 3 (33%)" in c for c in shown()))
            assert any("🔧 calling slow_count… step 1 of 3 (33%)" in c for c in shown())
            await answered_once(bot, fake, "Counted to three.")
            assert tool_result(server) == "counted 3"
        await llm.aclose()


def test_progress_updates_the_running_calls_line_and_a_question_is_the_status_until_answered() -> None:
    view = LiveView()
    view.record(TurnEvent(kind="tool_started", message="", tool="slow", tool_call_id="c1"), 0.0)
    view.record(
        TurnEvent(
            kind="tool_progress", message="step *2* of 4", tool="slow", tool_call_id="c1", fraction=0.5
        ),
        0.1,
    )
    assert view.status_lines() == "-# 🔧 calling slow… step \\*2\\* of 4 (50%)"
    request = _request()
    assert view.record(TurnEvent(kind="ask", message="", ask=Ask.of_input(request)), 0.2)
    assert "waiting for an answer" in view.status_lines()
    assert view.record(TurnEvent(kind="ask_done", message="accepted", ask=Ask.of_input(request)), 0.3)
    assert "waiting" not in view.status_lines()
    view.record(TurnEvent(kind="tool_finished", message="", tool="slow", tool_call_id="c1", ok=True), 1.1)
    assert view.status_lines().startswith("-# 🔧 slow ✓")


# --- the builders ----------------------------------------------------------------------------------------


def _request(**changes: Any) -> InputRequest:
    values: dict[str, Any] = {
        "request_id": "r" * 16,
        "key": ConversationKey(platform="discord", workspace="1", channel="2", thread="3"),
        "user_id": "42",
        "server": "asks",
        "tools": ("order_pizza",),
        "message": "What pizza would you like?",
        "mode": "form",
        "form": form_from_schema(PIZZA_FORM),
        "expires_at": 2_000_000_000.0,
        **changes,
    }
    return InputRequest(**values)


def test_a_modal_never_holds_more_than_five_fields_and_its_title_and_labels_fit() -> None:
    long_title = "x" * 80
    schema = {
        "type": "object",
        "properties": {
            "notes": {"type": "string", "title": long_title, "maxLength": 2000},
            "short": {"type": "string", "maxLength": 40},
            "many": {"type": "string", "enum": [f"v{i}" for i in range(30)]},
        },
    }
    request = _request(
        message="Please tell me everything about the order " * 3, form=form_from_schema(schema)
    )
    assert request.form is not None
    modal = InputModal(
        request=request, step=1, steps=steps_of(request.form), values={}, boot="0" * 8, submitted=_never
    )
    body = modal.to_dict()
    assert len(body["title"]) <= 45 and body["title"].endswith("…")
    notes, short, many = body["components"]
    assert len(notes["label"]) == 45 and notes["component"]["style"] == 2, "long text: a paragraph"
    assert short["component"]["style"] == 1 and short["component"]["max_length"] == 40
    assert many["component"]["type"] == 4, "more options than a select holds: typed"
    assert len(many["component"]["placeholder"]) <= 100
    pizza = _request()
    assert pizza.form is not None
    assert [len(step) for step in steps_of(pizza.form)] == [5, 5, 1]


def test_the_request_message_escapes_what_the_server_wrote_and_its_buttons_carry_the_request() -> None:
    text = request_text(_request(message="**now** @everyone <@1>", server="a`b"))
    assert "\\*\\*now\\*\\*" in text and "@everyone" not in text.replace("@\u200beveryone", "")
    assert "`aˋb`" in text
    made = custom_id(InputClick(action="step", request_id="r" * 16, step=3))
    assert made == f"nerve:in:s:{'r' * 16}:3" and re.fullmatch(TEMPLATE, made)
    with pytest.raises(ValueError):
        custom_id(InputClick(action="fill", request_id="no spaces allowed"))


async def _never(*_: Any) -> None:
    raise AssertionError("not submitted in this test")


def test_the_open_button_names_a_long_host_whole_up_to_discords_button_label_limit() -> None:
    import discord

    from adapters.discord.input_message import link_text

    host = "sign-in." + "a" * 50 + ".example"  # 66 characters: over a form label's 45, under a button's 80
    _, view = link_text(f"https://{host}/authorize?x=1")
    assert view is not None
    (button,) = view.children
    assert isinstance(button, discord.ui.Button)
    assert button.label == f"Open {host}"

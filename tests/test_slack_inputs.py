"""Servers asking for input on Slack: the request in the thread, the form in a modal, the answer.

The real bolt app serves signed HTTP deliveries (events, form-encoded `block_actions`,
`view_submission` and `view_closed`) and talks to the mock Slack Web API, which opens modals only
with a fresh trigger id and checks them against Slack's limits; the real `asks` test server runs as
a stdio subprocess and echoes exactly what it was sent; the model is the local fake model service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web

from adapters.slack.app import SlackBot, build_bot
from adapters.slack.client import make_client
from adapters.slack.input_view import (
    ModalPlace,
    error_blocks,
    input_modal,
    read_answer,
    request_message,
    settled_message,
)
from adapters.slack.serve import serve_http
from bot.agent import Agent, AgentConfig
from bot.asks.inputs import EXPIRED, NOT_YOURS
from bot.forms import Form, FormField, form_from_schema
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, InputRequest
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Step, own_text, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlack, OpenView, Posted, view_problems
from tests.test_slack_approvals import button
from tests.test_slack_approvals import click_payload as approval_click
from tests.test_slack_harness import mention, settings_for, sign

CHANNEL = "C0CHANNEL"
ALICE, BOB = "U0ALICE", "U0BOB"
LOGIN_URL = "https://login.example.com/authorize?x=1"


# A server on 2025-11-25 asks while its call waits (live); one on 2026-07-28 asks in the call's
# result, and the turn parks until the answer (as in the real runtime, whose store can park).
PROTOCOLS = {"live": "2025-11-25", "parked": "2026-07-28"}


@pytest.fixture(scope="module", params=list(PROTOCOLS.values()), ids=list(PROTOCOLS))
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def asks(protocol: str) -> AsyncIterator[MCPHost]:
    args = ["-m", "tests.mcp_servers.asks", "--protocol", protocol]
    server = ServerConfig(trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT))
    async with MCPHost({"asks": server}, default_timeout=30.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


@pytest.fixture(scope="module")
async def gated(protocol: str) -> AsyncIterator[MCPHost]:
    """The same server, with `ask_colour` waiting for approval before it runs."""
    args = ["-m", "tests.mcp_servers.asks", "--protocol", protocol]
    gate = {"ask_colour": ToolOverride(approval="always")}
    server = ServerConfig(trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT), tools=gate)
    async with MCPHost({"asks": server}, default_timeout=30.0) as started:
        async with asyncio.timeout(20):
            await started.wait_until_ready()
        yield started


@dataclass
class Rig:
    slack: FakeSlack
    llm: FakeLLMServer
    agent: Agent
    bot: SlackBot
    url: str
    http: aiohttp.ClientSession

    async def deliver(self, body: dict[str, Any]) -> int:
        raw = json.dumps(body)
        async with self.http.post(self.url, data=raw, headers=sign(raw)) as response:
            await response.read()
            return response.status

    async def interact(self, payload: dict[str, Any]) -> tuple[int, str]:
        """POST a signed, form-encoded interaction (as Slack sends clicks and modal events)."""
        raw = urlencode({"payload": json.dumps(payload)})
        headers = sign(raw)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        async with self.http.post(self.url, data=raw, headers=headers) as response:
            return response.status, await response.text()

    async def settle(self, within: float = 20.0) -> None:
        async with asyncio.timeout(within):
            await self.bot.idle()


@contextlib.asynccontextmanager
async def rig(
    tmp_path: Path,
    script: Sequence[Step],
    host: MCPHost,
    *,
    streaming: bool = False,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[Rig]:
    """Fake Slack and model service; the real agent (asking people through its store), bolt app and
    `asks` server."""
    async with FakeSlack() as slack, FakeLLMServer(script) as llm:
        slack.streaming = streaming
        store = await SQLiteStore.open(tmp_path / "nerve.db")
        model = OpenAILLM(model="test-model", base_url=llm.base_url, api_key=None, timeout=30, max_retries=0)
        agent = Agent(
            llm=model,
            host=host,
            store=store,
            inbox=store,
            approvals=store,
            inputs=store,
            config=AgentConfig(input_timeout=60, approval_timeout=60),
            clock=clock,
        )
        settings = settings_for(slack)
        bot = build_bot(
            agent, settings, client=make_client(settings), pace=0, status_interval=0, stream_interval=0
        )
        runner: web.AppRunner | None = None
        try:
            runner, url = await serve_http(bot, "127.0.0.1", 0)
            async with aiohttp.ClientSession() as http:
                yield Rig(slack=slack, llm=llm, agent=agent, bot=bot, url=url, http=http)
        finally:
            await bot.aclose()
            if runner is not None:
                await runner.cleanup()
            await model.aclose()
            await store.close()


# --- what Slack shows and sends ----------------------------------------------------------------------


def is_request(posted: Posted) -> bool:
    return "nerve_input" in json.dumps(posted.versions[0]) or "does not show" in posted.versions[0]["text"]


def request_messages(r: Rig, root: str) -> list[Posted]:
    return [p for p in r.slack.thread(CHANNEL, root) if p.streaming is None and is_request(p)]


def buttons(message: Posted) -> dict[str, dict[str, Any]]:
    """The message's buttons as it stands, by what they do (fill, decline, open)."""
    return {
        element["action_id"].split(".")[1]: element
        for block in message.current.get("blocks") or []
        if block.get("type") == "actions"
        for element in block["elements"]
    }


def shown(message: Posted | dict[str, Any]) -> str:
    version = message.current if isinstance(message, Posted) else message
    return json.dumps(version.get("blocks") or [], ensure_ascii=False)


def click_payload(message: Posted, pressed: dict[str, Any], user: str, trigger: str) -> dict[str, Any]:
    """A `block_actions` body as Slack sends it when `user` presses `pressed` on `message`."""
    action = {
        "type": "button",
        "action_id": pressed["action_id"],
        "block_id": "nerve_input",
        "value": pressed["value"],
        "action_ts": "1700000000.000001",
    }
    if "url" in pressed:
        action["url"] = pressed["url"]
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0000APP",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        "trigger_id": trigger,
        "team": {"id": TEAM_ID, "domain": "nerve-test"},
        "channel": {"id": message.channel, "name": "general"},
        "message": {
            "type": "message",
            "ts": message.ts,
            "thread_ts": message.thread_ts,
            "text": message.text,
            "blocks": message.current.get("blocks"),
        },
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [action],
    }


async def click(r: Rig, message: Posted, choice: str, user: str) -> str:
    """Press a button of the request message; returns the trigger id the click carried."""
    trigger = r.slack.trigger()
    status, _ = await r.interact(click_payload(message, buttons(message)[choice], user, trigger))
    assert status == 200
    return trigger


def ephemerals(r: Rig, user: str) -> list[str]:
    return [str(c.body["text"]) for c in r.slack.calls_of("chat.postEphemeral") if c.body["user"] == user]


async def ask_in_thread(r: Rig, text: str, root: str) -> Posted:
    """Mention the bot at `root`; returns the request message its turn posts in the thread."""
    await r.deliver(mention(f"<@{BOT_USER_ID}> {text}", ts=root, user=ALICE))
    await r.slack.wait_for(lambda _: bool(request_messages(r, root)), within=20)
    [message] = request_messages(r, root)
    return message


async def fill_in(r: Rig, message: Posted, user: str = ALICE) -> OpenView:
    """Click "Fill in" and return the modal Slack opened for it."""
    before = len(r.slack.views)
    trigger = await click(r, message, "fill", user)
    await r.slack.wait_for(lambda s: len(s.views) > before)
    view = r.slack.views[-1]
    assert view.trigger_id == trigger
    return view


async def pick(r: Rig, message: Posted, colour: str) -> None:
    """Fill in a colour request's form with `colour` and send it; the plain ack closes the modal."""
    view = await fill_in(r, message)
    [block] = inputs(view).values()
    picked = {"value": {"type": "static_select", "selected_option": option(block, colour)}}
    sent = r.slack.view_payload("view_submission", view, ALICE, {block["block_id"]: picked})
    assert await r.interact(sent) == (200, "")


def inputs(view: OpenView) -> dict[str, dict[str, Any]]:
    """The modal's input blocks by label."""
    return {b["label"]["text"]: b for b in view.current["blocks"] if b["type"] == "input"}


def option(block: dict[str, Any], label: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [o for o in block["element"]["options"] if o["text"]["text"] == label]
    [one] = found
    return one


def tool_results(r: Rig) -> list[str]:
    """What the tools returned, as the model was sent it (the raw result after the host's preamble)."""
    messages = r.llm.requests[-1]["messages"]
    raws = [
        str(m["content"]).split("Its raw result follows:\n", 1)[-1] for m in messages if m["role"] == "tool"
    ]
    return [_text(raw) for raw in raws]


def _text(raw: str) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def echoed(result: str) -> Any:
    """The content the `asks` server says it was sent (`accepted: {json}`)."""
    assert result.startswith("accepted: "), result
    return json.loads(result.removeprefix("accepted: "))


def answered(r: Rig, root: str, text: str) -> bool:
    return answers(r, root, text) > 0


def answers(r: Rig, root: str, text: str) -> int:
    """How many messages of the thread (other than requests) say `text`."""
    return sum(text in p.text for p in r.slack.thread(CHANNEL, root) if not is_request(p))


# --- the whole way: mention, request, modal, answer ----------------------------------------------------


async def test_a_form_is_filled_in_a_modal_and_the_tool_gets_exactly_what_was_sent(tmp_path, asks):
    script = [tool_reply(FakeCall(name="order_pizza", id="c_pizza")), reply("Your pizza is on its way.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500100"
        message = await ask_in_thread(r, "order me a pizza", root)

        blocks = shown(message)
        assert "`asks` asks for input" in blocks and "What pizza would you like?" in blocks
        assert "`order_pizza`" in blocks and f"<@{ALICE}> (who asked)" in blocks
        assert set(buttons(message)) == {"fill", "decline"}
        request_id = buttons(message)["fill"]["value"]
        assert buttons(message)["fill"]["action_id"] == f"nerve_input.fill.{request_id}"

        view = await fill_in(r, message)
        modal = view.current
        assert modal["type"] == "modal" and modal["notify_on_close"] is True
        assert json.loads(modal["private_metadata"])["r"] == request_id
        assert view_problems(modal) == []
        fields = inputs(view)
        assert list(fields) == [
            "Your name", "Email", "Website", "Delivery date", "Deliver at", "How many", "Tip (%)",
            "Extra cheese", "Size", "Crust", "Toppings",
        ]  # fmt: skip
        kinds = {label: block["element"]["type"] for label, block in fields.items()}
        assert kinds == {
            "Your name": "plain_text_input",
            "Email": "email_text_input",
            "Website": "url_text_input",
            "Delivery date": "datepicker",
            "Deliver at": "datetimepicker",
            "How many": "number_input",
            "Tip (%)": "number_input",
            "Extra cheese": "radio_buttons",
            "Size": "static_select",
            "Crust": "static_select",
            "Toppings": "multi_static_select",
        }
        required = {label for label, block in fields.items() if not block["optional"]}
        assert required == {"Your name", "Email"}
        assert fields["Your name"]["element"]["min_length"] == 2
        how_many = fields["How many"]["element"]
        assert how_many["is_decimal_allowed"] is False and how_many["initial_value"] == "1"
        assert (how_many["min_value"], how_many["max_value"]) == ("1", "10")
        assert fields["Tip (%)"]["element"]["is_decimal_allowed"] is True
        assert fields["Extra cheese"]["element"]["initial_option"]["text"]["text"] == "No"
        assert fields["Size"]["element"]["initial_option"]["text"]["text"] == "Medium"
        assert [o["text"]["text"] for o in fields["Crust"]["element"]["options"]] == [
            "Thin crust",
            "Thick crust",
        ]
        assert fields["Toppings"]["element"]["max_selected_items"] == 3
        assert "Between 1 and 10 pizzas." in fields["How many"]["hint"]["text"]
        assert "a whole number from 1 to 10" in fields["How many"]["hint"]["text"]

        size, toppings = fields["Size"], fields["Toppings"]
        values = {
            fields["Your name"]["block_id"]: {"value": {"type": "plain_text_input", "value": "Ada"}},
            fields["Email"]["block_id"]: {"value": {"type": "email_text_input", "value": "not an email"}},
            fields["Website"]["block_id"]: {"value": {"type": "url_text_input", "value": None}},
            fields["Delivery date"]["block_id"]: {
                "value": {"type": "datepicker", "selected_date": "2026-12-24"}
            },
            fields["Deliver at"]["block_id"]: {
                "value": {"type": "datetimepicker", "selected_date_time": 1798137000}
            },
            fields["How many"]["block_id"]: {"value": {"type": "number_input", "value": "2"}},
            fields["Tip (%)"]["block_id"]: {"value": {"type": "number_input", "value": "3.5"}},
            fields["Extra cheese"]["block_id"]: {
                "value": {"type": "radio_buttons", "selected_option": option(fields["Extra cheese"], "Yes")}
            },
            size["block_id"]: {"value": {"type": "static_select", "selected_option": option(size, "Large")}},
            fields["Crust"]["block_id"]: {"value": {"type": "static_select", "selected_option": None}},
            toppings["block_id"]: {
                "value": {
                    "type": "multi_static_select",
                    "selected_options": [option(toppings, "Mushrooms"), option(toppings, "Olives")],
                }
            },
        }
        status, body = await r.interact(r.slack.view_payload("view_submission", view, ALICE, values))
        assert status == 200
        refused = json.loads(body)
        assert refused["response_action"] == "errors"
        assert list(refused["errors"]) == [fields["Email"]["block_id"]]
        assert "email address" in refused["errors"][fields["Email"]["block_id"]]
        assert r.llm.requests and len(r.llm.requests) == 1, "the turn still waits for the answer"

        values[fields["Email"]["block_id"]] = {
            "value": {"type": "email_text_input", "value": "ada@example.com"}
        }
        status, body = await r.interact(r.slack.view_payload("view_submission", view, ALICE, values))
        assert (status, body) == (200, ""), "a plain ack closes the modal"
        await r.settle()

        [result] = tool_results(r)
        assert echoed(result) == {
            "name": "Ada",
            "email": "ada@example.com",
            "delivery_date": "2026-12-24",
            "deliver_at": "2026-12-24T18:30:00Z",
            "quantity": 2,
            "tip": 3.5,
            "extra_cheese": True,
            "size": "large",
            "toppings": ["mushroom", "olive"],
        }
        assert answers(r, root, "Your pizza is on its way.") == 1
        [message] = request_messages(r, root)
        assert buttons(message) == {} and "✅ Answered" in shown(message)
        assert "What pizza would you like?" in shown(message)
        assert r.slack.calls_of("chat.postEphemeral") == []


async def test_someone_else_clicking_fill_in_is_told_why_and_gets_no_modal(tmp_path, asks):
    script = [tool_reply(FakeCall(name="ask_colour", arguments='{"label": "door"}')), reply("Done.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500200"
        message = await ask_in_thread(r, "pick a colour for the door", root)

        await click(r, message, "fill", BOB)
        await r.slack.wait_for(lambda _: bool(ephemerals(r, BOB)))
        assert ephemerals(r, BOB) == [NOT_YOURS]
        assert r.slack.calls_of("views.open") == []
        assert r.slack.calls_of("chat.postEphemeral")[0].body["thread_ts"] == root
        assert buttons(message), "the request is still open for its person"

        await click(r, message, "decline", BOB)
        await r.slack.wait_for(lambda _: len(ephemerals(r, BOB)) == 2)
        assert ephemerals(r, BOB)[1] == NOT_YOURS

        await click(r, message, "decline", ALICE)
        await r.settle()
        assert tool_results(r) == ["door: declined"]


async def test_decline_tells_the_tool_it_was_declined_and_says_so_in_the_thread(tmp_path, asks):
    script = [tool_reply(FakeCall(name="order_pizza")), reply("No pizza then.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500300"
        message = await ask_in_thread(r, "order me a pizza", root)
        await click(r, message, "decline", ALICE)
        await r.settle()

        assert tool_results(r) == ["declined"]
        assert answered(r, root, "No pizza then.")
        [message] = request_messages(r, root)
        assert buttons(message) == {} and "🚫 Declined" in shown(message)
        assert len(message.versions) == 2, "updated once, whoever took the answer"
        assert r.slack.calls_of("views.open") == []

        # A late click on the old buttons changes nothing and says why, to the clicker only.
        stale = Posted(
            channel=message.channel, ts=message.ts, thread_ts=message.thread_ts, versions=message.versions[:1]
        )
        await click(r, stale, "fill", ALICE)
        await r.slack.wait_for(lambda _: bool(ephemerals(r, ALICE)))
        await r.settle()
        assert ephemerals(r, ALICE) == ["This was already declined."]
        assert r.slack.calls_of("views.open") == []
        assert len(request_messages(r, root)[0].versions) == 2


async def test_a_rate_limited_request_message_is_posted_once_after_the_wait(tmp_path, asks):
    script = [tool_reply(FakeCall(name="ask_colour", arguments='{"label": "fence"}')), reply("Fine.")]
    async with rig(tmp_path, script, asks) as r:
        # The live message is the first post; the request message is the second, and Slack says 429.
        r.slack.rate_limit_every("chat.postMessage", 2, retry_after=0)
        root = "1600000000.500350"
        message = await ask_in_thread(r, "pick a colour for the fence", root)
        limited = [c for c in r.slack.calls_of("chat.postMessage") if c.status == 429]
        assert len(limited) == 1 and "nerve_input" in json.dumps(limited[0].body)

        await click(r, message, "decline", ALICE)
        await r.settle()
        assert len(request_messages(r, root)) == 1
        assert tool_results(r) == ["fence: declined"]


async def test_a_question_is_shown_even_when_the_live_message_could_not_be_posted(tmp_path, asks):
    script = [tool_reply(FakeCall(name="ask_colour", arguments='{"label": "gate"}')), reply("Fine.")]
    async with rig(tmp_path, script, asks) as r:
        # The live message is the first post, and Slack refuses it: the question must not wait for it.
        r.slack.fail_next["chat.postMessage"] = "internal_error"
        root = "1600000000.500360"
        message = await ask_in_thread(r, "pick a colour for the gate", root)

        await click(r, message, "decline", ALICE)
        await r.settle()
        assert tool_results(r) == ["gate: declined"]
        assert answered(r, root, "Fine.")
        assert len(request_messages(r, root)) == 1


async def test_a_submission_after_the_request_ended_shows_why_in_the_modal(tmp_path, asks):
    clock = Clock(time.time())
    script = [tool_reply(FakeCall(name="ask_colour", arguments='{"label": "roof"}')), reply("Too late.")]
    async with rig(tmp_path, script, asks, clock=clock) as r:
        root = "1600000000.500500"
        message = await ask_in_thread(r, "pick a colour for the roof", root)
        view = await fill_in(r, message)
        [colour] = inputs(view).values()
        clock.now += 61

        picked = {
            colour["block_id"]: {"value": {"type": "static_select", "selected_option": option(colour, "red")}}
        }
        status, body = await r.interact(r.slack.view_payload("view_submission", view, ALICE, picked))
        assert status == 200
        refused = json.loads(body)
        assert refused["response_action"] == "errors"
        assert "expired" in refused["errors"][colour["block_id"]]
        await r.settle()
        [message] = request_messages(r, root)
        assert buttons(message) == {} and "⌛ Expired" in shown(message)

        # A live turn went on when its question expired; a parked one goes on when the sweep finds it.
        await r.bot.sweep()
        await r.settle()
        assert tool_results(r) == ["roof: cancelled"]
        assert answers(r, root, "Too late.") == 1


async def test_a_form_asking_for_a_secret_is_only_a_note_and_the_tool_gets_declined(tmp_path, asks):
    script = [tool_reply(FakeCall(name="ask_secret")), reply("I could not connect without it.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500600"
        await r.deliver(mention(f"<@{BOT_USER_ID}> connect my account", ts=root, user=ALICE))
        await r.settle()

        assert tool_results(r) == ["declined"]
        [note] = request_messages(r, root)
        assert buttons(note) == {} and len(note.versions) == 1
        assert "🔒" in shown(note) and "api_token" in shown(note) and "declined" in shown(note)
        assert answered(r, root, "I could not connect without it.")
        assert r.slack.calls_of("views.open") == []


async def test_url_mode_shows_the_host_and_the_open_button_carries_the_link(tmp_path, asks):
    script = [tool_reply(FakeCall(name="sign_in_elsewhere")), reply("Maybe later, then.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500700"
        message = await ask_in_thread(r, "read my calendar", root)

        blocks = message.current["blocks"]
        assert "The link goes to\n*login.example.com*" in [b.get("text", {}).get("text") for b in blocks]
        assert "Sign in to Example to let me read your calendar" in shown(message)
        assert set(buttons(message)) == {"open", "decline"}
        assert buttons(message)["open"]["url"] == LOGIN_URL
        assert "url" not in buttons(message)["decline"]

        await click(r, message, "decline", ALICE)
        await r.settle()
        assert tool_results(r) == ["url declined"]
        [message] = request_messages(r, root)
        assert buttons(message) == {} and "🚫 Declined" in shown(message)
        assert "login.example.com" in shown(message)


async def test_opening_the_link_is_the_askers_consent(tmp_path, asks, protocol):
    script = [tool_reply(FakeCall(name="sign_in_elsewhere")), reply("Signed in.")]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500800"
        message = await ask_in_thread(r, "read my calendar", root)
        assert buttons(message)["open"]["url"] == LOGIN_URL

        await click(r, message, "open", BOB)
        await r.slack.wait_for(lambda _: bool(ephemerals(r, BOB)))
        assert ephemerals(r, BOB) == [NOT_YOURS]

        await click(r, message, "open", ALICE)
        await r.settle()
        assert tool_results(r) == ["url accepted"]
        [message] = request_messages(r, root)
        assert buttons(message) == {}
        assert "✅ Opened" in json.dumps(message.versions, ensure_ascii=False)
        if protocol == PROTOCOLS["live"]:
            # The older revision says when it has finished with the link; the message says so last.
            assert "✅ Done" in shown(message)
        else:
            assert "✅ Opened" in shown(message)


async def test_the_request_is_its_own_message_next_to_a_streamed_answer(tmp_path, asks, protocol):
    script = [tool_reply(FakeCall(name="ask_colour", arguments='{"label": "gate"}')), reply("Gate is blue.")]
    async with rig(tmp_path, script, asks, streaming=True) as r:
        root = "1600000000.500900"
        message = await ask_in_thread(r, "pick a colour for the gate", root)
        view = await fill_in(r, message)
        [colour] = inputs(view).values()
        picked = {
            colour["block_id"]: {
                "value": {"type": "static_select", "selected_option": option(colour, "blue")}
            }
        }
        assert await r.interact(r.slack.view_payload("view_submission", view, ALICE, picked)) == (200, "")
        await r.settle()

        assert tool_results(r) == ["gate: blue"]
        streams = r.slack.streams()
        # A parked turn's first part ends saying what it waits for; the resumed turn streams the answer.
        assert len(streams) == (1 if protocol == PROTOCOLS["live"] else 2)
        assert all(stream.thread_ts == root for stream in streams)
        assert "Gate is blue." in streams[-1].text and answers(r, root, "Gate is blue.") == 1
        for stream in streams:
            assert "nerve_input" not in stream.everything() and "asks for input" not in stream.everything()
        [message] = request_messages(r, root)
        assert "✅ Answered" in shown(message)


async def test_a_question_the_resumed_turn_asks_next_is_shown_and_answered_too(tmp_path, asks):
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "door"}', id="c_door")),
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "gate"}', id="c_gate")),
        reply("The door is red and the gate is blue."),
    ]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500950"
        door = await ask_in_thread(r, "paint the door and the gate", root)
        await pick(r, door, "red")
        # Parked: the answer resumes the turn, whose next round asks (and parks) again.
        await r.slack.wait_for(lambda _: len(request_messages(r, root)) == 2, within=20)
        gate = request_messages(r, root)[1]
        assert "Pick a colour for gate" in shown(gate) and set(buttons(gate)) == {"fill", "decline"}
        await pick(r, gate, "blue")
        await r.settle()

        assert tool_results(r) == ["door: red", "gate: blue"]
        assert answers(r, root, "The door is red and the gate is blue.") == 1
        for message in request_messages(r, root):
            assert buttons(message) == {} and "✅ Answered" in shown(message)


async def test_a_message_written_while_a_question_waits_is_answered_after_the_answer(tmp_path, asks):
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "porch"}')),
        reply("The porch is green."),
        reply("You are welcome."),
    ]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.500955"
        message = await ask_in_thread(r, "pick a colour for the porch", root)
        later = mention(f"<@{BOT_USER_ID}> thanks in advance", thread_ts=root, user=ALICE)
        assert await r.deliver(later) == 200
        await pick(r, message, "green")
        await r.slack.wait_for(lambda _: answered(r, root, "You are welcome."), within=20)
        await r.settle()

        assert answers(r, root, "The porch is green.") == 1 and answers(r, root, "You are welcome.") == 1
        texts = [p.text for p in r.slack.thread(CHANNEL, root) if not is_request(p)]
        first = next(i for i, text in enumerate(texts) if "The porch is green." in text)
        assert "You are welcome." in " ".join(texts[first + 1 :]), texts
        assert [own_text(m["content"]) for m in r.llm.requests[-1]["messages"] if m["role"] == "user"][
            -1
        ].endswith("thanks in advance")


async def test_an_approved_call_that_asks_shows_its_question_in_the_resumed_turn(tmp_path, gated):
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "fence"}', id="c_fence")),
        reply("The fence is green."),
    ]
    async with rig(tmp_path, script, gated) as r:
        root = "1600000000.500960"
        await r.deliver(mention(f"<@{BOT_USER_ID}> paint the fence", ts=root, user=ALICE))
        await r.slack.wait_for(
            lambda s: any("nerve_approval" in p.everything() for p in s.thread(CHANNEL, root))
        )
        [approval] = [p for p in r.slack.thread(CHANNEL, root) if "nerve_approval" in p.everything()]
        assert await r.interact(approval_click(approval, button(approval, "approve", 0), ALICE)) == (200, "")

        # The call runs in the resumed turn and asks (while it waits, whichever revision).
        await r.slack.wait_for(lambda _: bool(request_messages(r, root)), within=20)
        [question] = request_messages(r, root)
        await pick(r, question, "green")
        await r.settle()

        assert tool_results(r) == ["fence: green"]
        assert answers(r, root, "The fence is green.") == 1
        [question] = request_messages(r, root)
        assert buttons(question) == {} and "✅ Answered" in shown(question)


async def test_a_question_nobody_answers_expires_and_the_answer_goes_on_without_it(tmp_path, asks):
    clock = Clock(time.time())
    script = [
        tool_reply(FakeCall(name="ask_colour", arguments='{"label": "shed"}')),
        reply("Nobody picked a colour for the shed, so I left it."),
    ]
    async with rig(tmp_path, script, asks, clock=clock) as r:
        r.bot.start_sweeper(0.05)
        root = "1600000000.500970"
        message = await ask_in_thread(r, "pick a colour for the shed", root)
        clock.now += 61
        # Live: the waiting call sees the time is up. Parked: the sweep finds the turn and resumes it.
        await r.slack.wait_for(lambda _: answered(r, root, "Nobody picked"), within=20)
        await r.settle()

        assert tool_results(r) == ["shed: cancelled"]
        assert answers(r, root, "Nobody picked a colour for the shed") == 1
        [message] = request_messages(r, root)
        assert buttons(message) == {} and "⌛ Expired" in shown(message)

        # A click on the buttons as they were changes nothing and says why, to the clicker only.
        stale = Posted(
            channel=message.channel, ts=message.ts, thread_ts=message.thread_ts, versions=message.versions[:1]
        )
        await click(r, stale, "decline", ALICE)
        await r.slack.wait_for(lambda _: bool(ephemerals(r, ALICE)))
        await r.settle()
        assert ephemerals(r, ALICE) == [EXPIRED]
        assert len(r.llm.requests) == 2


async def test_a_calls_progress_shows_in_the_live_message(tmp_path, asks):
    script = [
        tool_reply(FakeCall(name="slow_count", arguments='{"n": 3, "pause": 0.2}', id="c_count")),
        reply("Counted to three."),
    ]
    async with rig(tmp_path, script, asks) as r:
        root = "1600000000.501000"
        await r.deliver(mention(f"<@{BOT_USER_ID}> count to three", ts=root, user=ALICE))
        await r.settle()

        [live] = r.slack.thread(CHANNEL, root)
        seen = live.everything()
        assert "step 3 of 3 (100%)" in seen or "step 2 of 3 (67%)" in seen
        assert "Counted to three." in live.text


async def test_a_calls_progress_shows_on_its_task_in_a_streamed_answer(tmp_path, asks):
    script = [
        tool_reply(FakeCall(name="slow_count", arguments='{"n": 3, "pause": 0.2}', id="c_count")),
        reply("Counted to three."),
    ]
    async with rig(tmp_path, script, asks, streaming=True) as r:
        root = "1600000000.501100"
        await r.deliver(mention(f"<@{BOT_USER_ID}> count to three", ts=root, user=ALICE))
        await r.settle()

        [stream] = r.slack.streams()
        details = [v["tasks"].get("c_count", {}).get("details") for v in stream.versions if "tasks" in v]
        assert any(d and d.startswith("step ") and "%)" in d for d in details), details


# --- the views on their own ------------------------------------------------------------------------


def _request(**fields: Any) -> InputRequest:
    values: dict[str, Any] = {
        "request_id": "r-1",
        "key": ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.1"),
        "user_id": ALICE,
        "server": "asks",
        "tools": ("order_pizza",),
        "message": "Your order?",
        "mode": "form",
        "expires_at": 2_000_000_000.0,
    }
    values.update(fields)
    return InputRequest(**values)


def test_server_text_is_escaped_and_cannot_ping_or_disguise_a_link():
    request = _request(
        message="<!here> pay at <http://evil.example|bank.example> & *now*", server="<!channel>"
    )
    text = shown({"blocks": request_message(request).blocks}) + shown(
        {"blocks": settled_message(request, "declined").blocks}
    )
    assert "<!here>" not in text and "<!channel>" not in text and "<http://evil" not in text
    assert "&lt;http://evil.example|bank.example&gt; &amp;" in text


def test_a_look_alike_host_is_shown_in_its_ascii_form_too():
    request = _request(mode="url", url="https://раураl.com/login", message="Sign in")
    blocks = request_message(request).blocks or []
    host_line = blocks[1]["text"]["text"]
    assert host_line.startswith("The link goes to\n*раураl.com (xn--")


def test_a_huge_form_stays_within_slacks_limits_and_maps_back_to_its_fields():
    many = tuple((f"value-{i}-" + "v" * 200, f"Option {i} " + "label " * 20) for i in range(150))
    fields = [
        FormField(name="pick", title="Pick " * 600, kind="choice", options=many, default=many[120][0]),
        FormField(name="several", title="Several", kind="choices", options=many, default=(many[3][0],)),
        FormField(name="essay", title="Essay", kind="text", max_length=10_000, min_length=5_000),
    ]
    fields += [FormField(name=f"f{i}", title=f"Field {i}", kind="text") for i in range(120)]
    form = Form(fields=tuple(fields))
    request = _request(server="a-server-with-a-rather-long-name", form=form, message="x" * 5_000)
    modal = input_modal(request, ModalPlace(request_id="r-1", channel=CHANNEL, thread_ts="1.1"))

    assert view_problems(modal) == []
    assert len(modal["title"]["text"]) <= 24 and len(modal["blocks"]) == 100
    assert "more fields cannot be shown" in json.dumps(modal["blocks"])
    pick = modal["blocks"][2]
    assert len(pick["element"]["options"]) == 100 and "initial_option" not in pick["element"]
    assert "first 100 of 150 options" in pick["hint"]["text"]
    several = modal["blocks"][3]["element"]
    assert [o["value"] for o in several["initial_options"]] == ["3"]

    values = {
        "field.0": {"value": {"type": "static_select", "selected_option": pick["element"]["options"][7]}},
        "field.1": {"value": {"type": "multi_static_select", "selected_options": several["options"][1:3]}},
        "field.2": {"value": {"type": "plain_text_input", "value": ""}},
    }
    assert read_answer(form, values) == {"pick": many[7][0], "several": [many[1][0], many[2][0]]}
    errors = error_blocks(form, {"pick": "Bad.", "f119": "Required."}, modal["blocks"])
    assert errors == {"field.0": "Bad. Field 119: Required."}


def test_every_kind_of_field_maps_its_default_and_its_submitted_value():
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time", "default": "2026-12-24T18:30:00+01:00"},
            "day": {"type": "string", "format": "date", "default": "2026-12-24"},
            "ok": {"type": "boolean", "default": True},
            "n": {"type": "number", "default": 2.5},
        },
        "required": ["ok"],
    }
    form = form_from_schema(schema)
    modal = input_modal(_request(form=form), ModalPlace(request_id="r-1"))
    elements = {b["block_id"]: b["element"] for b in modal["blocks"] if b["type"] == "input"}
    assert elements["field.0"]["initial_date_time"] == 1798133400
    assert elements["field.1"]["initial_date"] == "2026-12-24"
    assert elements["field.2"]["initial_option"]["value"] == "true"
    assert elements["field.3"]["initial_value"] == "2.5"
    values = {
        "field.0": {"value": {"type": "datetimepicker", "selected_date_time": 1798133400}},
        "field.1": {"value": {"type": "datepicker", "selected_date": None}},
        "field.2": {"value": {"type": "radio_buttons", "selected_option": elements["field.2"]["options"][1]}},
        "field.3": {"value": {"type": "number_input", "value": "4"}},
    }
    assert read_answer(form, values) == {"when": "2026-12-24T17:30:00Z", "ok": False, "n": "4"}

"""A server's questions in the terminal: a form asked field by field, a link to open, a secret refused.

`nerve chat` runs on a pseudo-terminal against the asking test server (tests/mcp_servers/asks.py)
and the local fake model service; the server echoes exactly what it was sent, and the model's next
request shows what the tool returned. Both ways a server asks are covered: on 2025-11-25 while its
call waits (live), on 2026-07-28 in its call's result, which parks the turn until the answer.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from adapters.terminal.live import SPINNER
from bot.asks.inputs import InputDesk
from bot.store.sqlite import SQLiteStore
from bot.types import InputAnswer
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.test_cli import run_nerve
from tests.test_inputs import asks_server
from tests.test_terminal import PROMPT, chat_env, nerve, terminal
from tests.test_terminal_approvals import tool_content
from tests.test_thread_lock import until

SEND = b"Send? [Y/n/d=decline]"
COLOUR = b"  Colour* (one of: red, green, blue):"
# What a parked turn answers before it goes on: never shown as if it were the answer.
PARKED_TEXT = b"Waiting for your answer"

LIVE = ("--protocol", "2025-11-25")  # the server asks while its call waits
PARKED = ("--protocol", "2026-07-28")  # the server asks in its call's result: the turn parks
both_ways = pytest.mark.parametrize("protocol", [LIVE, PARKED], ids=["live", "parked"])


def env_for(tmp_path: Path, model: FakeLLMServer, *server_args: str) -> dict[str, str]:
    config = tmp_path / "mcp.json"
    asks = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.asks", *server_args],
        "cwd": str(ROOT),
    }
    config.write_text(json.dumps({"mcpServers": {"asks": asks}}))
    return chat_env(
        tmp_path, NERVE_MCP_CONFIG=str(config), OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="t"
    )


def returned(request: dict, call_id: str) -> str:
    """What the tool returned, as the model read it in its next request."""
    content = tool_content(request, call_id)
    return json.loads(content[content.index("\n") + 1 :])


def call(name: str, call_id: str, **arguments: object) -> FakeCall:
    return FakeCall(name=name, arguments=json.dumps(arguments), id=call_id)


@both_ways
async def test_a_form_is_asked_field_by_field_checked_as_typed_and_sent(tmp_path, protocol):
    script = [tool_reply(call("order_pizza", "c1")), reply("Your pizza is ordered.")]
    async with FakeLLMServer(script) as model:
        async with terminal(*nerve("chat"), env=env_for(tmp_path, model, *protocol)) as term:
            at = await term.expect(PROMPT)
            term.type(b"order me a pizza\r")
            at = await term.expect(b"asks you to fill in a form for order_pizza", after=at)
            asked_at = at
            at = await term.expect(b"What pizza would you like?", after=at)
            answers = [
                (b"  Your name* (text, at least 2 characters):", b"A"),
                (b"Use at least 2 characters (this has 1).", None),
                (b"  Your name* (text, at least 2 characters):", b"Ada"),
                (b"  Email* (an email address):", b"ada@example"),
                (b"Enter an email address", None),
                (b"  Email* (an email address):", b"ada@example.com"),
                (b"  Website (a link like https://example.com):", b""),
                (b"  Delivery date (a date like 2026-12-31):", b"2026-13-01"),
                (b"Enter a date as YYYY-MM-DD", None),
                (b"  Delivery date (a date like 2026-12-31):", b"2026-12-31"),
                (b"  Deliver at (a date and time like 2026-12-31T18:30:00Z):", b""),
                (b"Between 1 and 10 pizzas.", None),
                (b"  How many (a whole number from 1 to 10) [1]:", b"11"),
                (b"Enter a whole number from 1 to 10.", None),
                (b"  How many (a whole number from 1 to 10) [1]:", b""),
                (b"  Tip (%) (a number from 0 to 100):", b"15"),
                (b"  Extra cheese (yes or no) [no]:", b"Y"),
                (b"  Size (one of: Small, Medium, Large) [Medium]:", b""),
                (b"  Crust (one of: Thin crust, Thick crust):", b"thick CRUST"),
                (b"Up to three.", None),
                (
                    b"  Toppings (up to 3 of: Mushrooms, Olives, Pepperoni, Pineapple; commas between):",
                    b"olives, mushroom",
                ),
            ]
            for shown, typed in answers:
                at = await term.expect(shown, after=at)
                if typed is not None:
                    term.type(typed + b"\r")
            at = await term.expect(SEND, after=at)
            # Nothing drew over the questions: the live view stepped aside while they were asked.
            assert not any(frame.encode() in term.output[asked_at:at] for frame in SPINNER)
            term.type(b"\r")  # Enter after filling in sends: cancelling is typed on purpose
            at = await term.expect(b"Sent.", after=at)
            at = await term.expect(b"Your pizza is ordered.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    sent = {
        "crust": "thick",
        "delivery_date": "2026-12-31",
        "email": "ada@example.com",
        "extra_cheese": True,
        "name": "Ada",
        "quantity": 1,
        "size": "medium",
        "tip": 15,
        "toppings": ["olive", "mushroom"],
    }
    assert returned(model.requests[1], "c1") == f"accepted: {json.dumps(sent, sort_keys=True)}"
    assert PARKED_TEXT not in term.output
    assert "Traceback" not in term.screen()


@both_ways
async def test_decline_a_form_open_a_link_yourself_and_a_secret_is_never_asked(tmp_path, protocol):
    script = [
        tool_reply(call("ask_colour", "c1", label="wall")),
        reply("You declined."),
        tool_reply(call("sign_in_elsewhere", "c2")),
        reply("Signed in."),
        tool_reply(call("ask_secret", "c3")),
        reply("No token, then."),
    ]
    async with FakeLLMServer(script) as model:
        async with terminal(*nerve("chat"), env=env_for(tmp_path, model, *protocol)) as term:
            at = await term.expect(PROMPT)
            term.type(b"paint the wall\r")
            at = await term.expect(b"Pick a colour for wall", after=at)
            at = await term.expect(b"  Colour* (one of: red, green, blue):", after=at)
            term.type(b"Red\r")
            at = await term.expect(SEND, after=at)
            term.type(b"maybe\r")
            at = await term.expect(b"Press Enter or y to send it, n to send nothing, d to decline.", after=at)
            at = await term.expect(SEND, after=at)
            term.type(b"d\r")
            at = await term.expect(b"Declined.", after=at)
            at = await term.expect(b"You declined.", after=at)

            at = await term.expect(PROMPT, after=at)
            term.type(b"sign me in\r")
            at = await term.expect(b"wants you to open a link for sign_in_elsewhere", after=at)
            at = await term.expect(b" login.example.com ", after=at)
            at = await term.expect(b"Sign in to Example to let me read your calendar", after=at)
            at = await term.expect(b"https://login.example.com/authorize?x=1", after=at)
            at = await term.expect(
                b"Open it yourself, then press Enter when done, or type d to decline:", after=at
            )
            term.type(b"\r")
            at = await term.expect(b"Signed in.", after=at)

            at = await term.expect(PROMPT, after=at)
            term.type(b"use my token\r")
            at = await term.expect(b"Not shown:", after=at)
            at = await term.expect(b"No token, then.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "wall: declined"
    assert returned(model.requests[3], "c2") == "url accepted"
    assert returned(model.requests[5], "c3") == "declined"
    assert b"API token (" not in term.output  # the secret's field was never asked
    assert PARKED_TEXT not in term.output


async def test_ctrl_c_at_a_field_cancels_the_question_and_then_cancels_the_turn_again(tmp_path):
    script = [
        tool_reply(call("ask_colour", "c1", label="door")),
        tool_reply(call("slow_count", "c2", n=600, pause=0.05)),
    ]
    async with (
        FakeLLMServer(script) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model, *LIVE)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b"paint the door, then count\r")
        at = await term.expect(COLOUR, after=at)
        term.type(b"\x03")
        at = await term.expect(b"Cancelled: nothing was sent.", after=at)
        # The question gave Ctrl-C back to the turn: it stops the slow call that follows.
        at = await term.expect(b"slow_count", after=at)
        term.type(b"\x03")
        at = await term.expect(b"Cancelled. Your message is kept", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert returned(model.requests[1], "c1") == "door: cancelled"
    assert "Traceback" not in term.screen()


# --- nerve ask --------------------------------------------------------------------------------------


@both_ways
async def test_ask_on_a_terminal_asks_the_question_like_the_chat(tmp_path, protocol):
    script = [tool_reply(call("ask_colour", "c1", label="gate")), reply("The gate will be green.")]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, model, *protocol)
        async with terminal(*nerve("ask", "paint the gate"), env=env) as term:
            at = await term.expect(COLOUR)
            term.type(b"GREEN\r")
            at = await term.expect(SEND, after=at)
            term.type(b"y\r")
            await term.expect(b"The gate will be green.", after=at)
            assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "gate: green"
    assert PARKED_TEXT not in term.output


@both_ways
async def test_ask_in_a_script_declines_a_question_at_once_and_says_so(tmp_path, protocol):
    script = [tool_reply(call("ask_colour", "c1", label="gate")), reply("Nothing was chosen.")]
    async with FakeLLMServer(script) as model:
        env = env_for(tmp_path, model, *protocol)
        code, out, err = await run_nerve("ask", "paint the gate", env=env)
        model.assert_complete()
    assert code == 0, err
    assert out.strip() == "Nothing was chosen."
    assert "nerve: declined: asks asked for input; run on a terminal to answer" in err
    assert returned(model.requests[1], "c1") == "gate: declined"


# --- a turn parked on a question --------------------------------------------------------------------


async def test_two_calls_that_park_on_questions_are_asked_in_turn_and_each_gets_its_answer(tmp_path):
    both = tool_reply(call("ask_colour", "c1", label="roof"), call("ask_colour", "c2", label="porch"))
    script = [both, reply("A red roof and a blue porch.")]
    colours = {"roof": b"red", "porch": b"blue"}
    async with (
        FakeLLMServer(script) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model, *PARKED)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b"paint the roof and the porch\r")
        for _ in colours:
            at = await term.expect(b"Pick a colour for ", after=at)
            label = next(name for name in colours if term.output.startswith(name.encode(), at))
            at = await term.expect(COLOUR, after=at)
            term.type(colours[label] + b"\r")
            at = await term.expect(SEND, after=at)
            term.type(b"y\r")
            at = await term.expect(b"Sent.", after=at)
        at = await term.expect(b"A red roof and a blue porch.", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "roof: red"
    assert returned(model.requests[1], "c2") == "porch: blue"
    assert PARKED_TEXT not in term.output


async def answer_elsewhere(db: Path, colour: str) -> None:
    """Another nerve process answers the open question of the parked turn (and does not resume it)."""
    async with aiosqlite.connect(db) as raw:
        [(request_id,)] = list(
            await raw.execute_fetchall("SELECT id FROM input_requests WHERE status = 'open'")
        )
    store = await SQLiteStore.open(db)
    try:
        desk = InputDesk(store, clock=time.time, timeout=600)
        answer = InputAnswer(action="accept", content={"colour": colour})
        outcome = await desk.answer(str(request_id), getpass.getuser(), answer)
    finally:
        await store.close()
    assert outcome.changed and outcome.resume is not None


async def test_a_parked_question_answered_elsewhere_meanwhile_goes_on_with_that_answer(tmp_path):
    script = [tool_reply(call("ask_colour", "c1", label="gate")), reply("The gate will be blue.")]
    async with (
        FakeLLMServer(script) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model, *PARKED)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b"paint the gate\r")
        at = await term.expect(COLOUR, after=at)
        await answer_elsewhere(tmp_path / "nerve.db", "blue")
        term.type(b"red\r")
        at = await term.expect(SEND, after=at)
        term.type(b"y\r")
        at = await term.expect(b"This was already answered.", after=at)
        # Nobody went on with the turn there: it goes on here, with the answer given there.
        at = await term.expect(b"The gate will be blue.", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "gate: blue"
    assert PARKED_TEXT not in term.output
    assert "Traceback" not in term.screen()


async def test_a_question_and_an_approval_in_one_round_are_both_asked_then_the_turn_goes_on(tmp_path):
    # grow_tools changes the server (no read-only annotation): it waits for approval.
    both = tool_reply(call("ask_colour", "c1", label="fence"), call("grow_tools", "c2"))
    script = [both, reply("The fence is green, and there is a new tool.")]
    async with (
        FakeLLMServer(script) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model, *PARKED)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b"paint the fence and grow\r")
        at = await term.expect(COLOUR, after=at)
        term.type(b"green\r")
        at = await term.expect(SEND, after=at)
        term.type(b"y\r")
        at = await term.expect(b"Sent.", after=at)
        at = await term.expect(b"Run grow_tools()? [y]es / [n]o / [a]lways here", after=at)
        term.type(b"y\r")
        at = await term.expect(b"The fence is green, and there is a new tool.", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "fence: green"
    assert returned(model.requests[1], "c2") == "added new_tool"
    assert PARKED_TEXT not in term.output


async def thread_let_go(db: Path) -> None:
    """Wait until no turn holds a conversation (a process killed while holding one keeps it a lease)."""

    async def free() -> bool:
        async with aiosqlite.connect(db) as raw:
            return not list(await raw.execute_fetchall("SELECT 1 FROM turn_locks"))

    await until(free)


async def leave_asking(term, db: Path, text: bytes, *, after: int = 0) -> None:
    """Ask for something a tool asks about, then stop the chat while its question is on the screen."""
    term.type(text + b"\r")
    await term.expect(COLOUR, after=after)
    await thread_let_go(db)  # the turn has parked: nothing of it holds the thread
    os.killpg(term.process.pid, signal.SIGKILL)
    await term.exit_code()


@contextlib.asynccontextmanager
async def remote_asks(tmp_path: Path, model: FakeLLMServer) -> AsyncIterator[dict[str, str]]:
    """The chat's settings with the asking server over HTTP: it outlives each chat, and with it the
    state it gave the call that asked, so the call made again after a restart gets its answer."""
    async with asks_server("http", "2026-07-28") as server:
        config = tmp_path / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "asks": {"url": server.url, "allowPrivateNetwork": True, "trustAnnotations": True}
                    }
                }
            )
        )
        yield chat_env(
            tmp_path, NERVE_MCP_CONFIG=str(config), OPENAI_BASE_URL=model.base_url, OPENAI_API_KEY="t"
        )


async def test_a_question_left_open_by_a_stopped_chat_is_asked_at_start_and_goes_on_once_expired(tmp_path):
    script = [
        tool_reply(call("ask_colour", "c1", label="shed")),
        reply("The shed will be red."),
        tool_reply(call("ask_colour", "c2", label="barn")),
        reply("No colour for the barn, then."),
    ]
    db = tmp_path / "nerve.db"
    async with FakeLLMServer(script) as model, remote_asks(tmp_path, model) as env:
        async with terminal(*nerve("chat"), env=env) as term:
            await leave_asking(term, db, b"paint the shed", after=await term.expect(PROMPT))

        # The next start asks it again, field by field, and prints the turn's answer before the prompt.
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(b"waits for an answer to what a tool asked before nerve stopped")
            at = await term.expect(b"Pick a colour for shed", after=at)
            at = await term.expect(COLOUR, after=at)
            term.type(b"red\r")
            at = await term.expect(SEND, after=at)
            term.type(b"y\r")
            at = await term.expect(b"Sent.", after=at)
            at = await term.expect(b"The shed will be red.", after=at)
            assert PROMPT not in term.output[:at], "answered before the first prompt"
            at = await term.expect(PROMPT, after=at)
            await leave_asking(term, db, b"paint the barn", after=at)

        # This one's time runs out while no chat is open: the turn goes on without it, nothing asked.
        async with aiosqlite.connect(db) as raw:
            await raw.execute("UPDATE parked_turns SET expires_at = 1")
            await raw.execute("UPDATE input_requests SET expires_at = 1 WHERE status = 'open'")
            await raw.commit()
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(b"No colour for the barn, then.")
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert COLOUR not in term.output
        model.assert_complete()
    # The call was made again with the answer (or with "cancel" once expired), and the server took it.
    assert returned(model.requests[1], "c1") == "shed: red"
    assert returned(model.requests[3], "c2") == "barn: cancelled"
    assert b"Approval needed" not in term.output
    assert PARKED_TEXT not in term.output
    assert "Traceback" not in term.screen()


async def test_ctrl_c_at_a_question_asked_again_at_start_cancels_it_and_the_turn_goes_on(tmp_path):
    script = [tool_reply(call("ask_colour", "c1", label="attic")), reply("No colour for the attic, then.")]
    db = tmp_path / "nerve.db"
    async with FakeLLMServer(script) as model, remote_asks(tmp_path, model) as env:
        async with terminal(*nerve("chat"), env=env) as term:
            await leave_asking(term, db, b"paint the attic", after=await term.expect(PROMPT))

        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(COLOUR)
            term.type(b"\x03")
            at = await term.expect(b"Cancelled: nothing was sent.", after=at)
            at = await term.expect(b"No colour for the attic, then.", after=at)
            assert PROMPT not in term.output[:at], "answered before the first prompt"
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "attic: cancelled"
    assert "Traceback" not in term.screen()


async def test_a_question_and_an_approval_left_open_are_both_asked_at_start_then_the_turn_goes_on(tmp_path):
    # grow_tools changes the server (no read-only annotation): it waits for approval.
    both = tool_reply(call("ask_colour", "c1", label="fence"), call("grow_tools", "c2"))
    script = [both, reply("The fence is green, and there is a new tool.")]
    db = tmp_path / "nerve.db"
    async with FakeLLMServer(script) as model, remote_asks(tmp_path, model) as env:
        async with terminal(*nerve("chat"), env=env) as term:
            await leave_asking(term, db, b"paint the fence and grow", after=await term.expect(PROMPT))

        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(COLOUR)
            term.type(b"green\r")
            at = await term.expect(SEND, after=at)
            term.type(b"y\r")
            at = await term.expect(b"Run grow_tools()? [y]es / [n]o / [a]lways here", after=at)
            term.type(b"y\r")
            at = await term.expect(b"The fence is green, and there is a new tool.", after=at)
            assert PROMPT not in term.output[:at], "answered before the first prompt"
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert returned(model.requests[1], "c1") == "fence: green"
    assert returned(model.requests[1], "c2") == "added new_tool"

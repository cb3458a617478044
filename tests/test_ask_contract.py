"""The contract of an ask, written once and checked on Slack, Discord and the terminal.

Each scenario drives a surface through its fake (tests/surfaces.py) as people use it: the model
wants to read the note and append a line; the read runs at once, the append waits for a person.
Then a server's questions: the `asks` server's tool asks for a form or a link to open, and the
person answers it, declines it, closes it unsent or opens the link. Last, a sign-in: a per-person
server needs one, the turn parks, and the browser comes back to another process than the one that
asked, which goes on with the turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.asks.parking import ALREADY_DECIDED, EXPIRED, NOT_YOURS
from bot.text.turn_note import split_note
from tests.fakes.llm_server import FakeCall, Reply, reply, tool_reply
from tests.mcp_servers.asks import LOGIN_URL
from tests.surfaces import SURFACES, Era, Surface, open_sign_in_surface, open_surface, ran
from tests.test_notes_oauth_server import RunningServer, start_server, stop_server
from tests.test_slack_sign_in import Model, who_the_tool_said, whoami

ONE_PERSON = "a terminal has one person at it: nobody else can answer its ask"


def read_and_add(text: str = "hi") -> Reply:
    return tool_reply(
        FakeCall(name="read_note", arguments="{}", id="c_read"),
        FakeCall(name="append_note", arguments=json.dumps({"text": text}), id="c_add"),
        content="I'll read the note and add your line.",
    )


def others(reason: str) -> list[object]:
    """Slack and Discord; the terminal marked with why the scenario cannot happen there."""
    return ["slack", "discord", pytest.param("terminal", marks=pytest.mark.skip(reason=reason))]


def says(shown: str, words: str, who: str) -> bool:
    """Whether the ask shows `words` (in any case: "Approved by" on Slack) and then `who`, exactly."""
    return re.search(f"(?i:{re.escape(words)}) {re.escape(who)}", shown) is not None


def told_the_model(llm: object) -> str:
    """What the model read for the call that waited: the last tool message of its last request."""
    messages = llm.last_messages()  # type: ignore[attr-defined]
    # As its tool wrote it: the turn's note may end the request's last message.
    return split_note(str([m for m in messages if m["role"] == "tool"][-1]["content"]))[0]


@pytest.mark.parametrize("kind", SURFACES)
async def test_approve_runs_the_call_and_the_answer_follows(kind: str, tmp_path: Path) -> None:
    async with open_surface(kind, tmp_path, [read_and_add(), reply("Added it.")]) as s:
        ask = await s.ask("add hi to the note")
        assert ran(s.notes) == ["read_note"], "the read runs at once, the write waits"
        assert s.notes.read_text(encoding="utf-8") == "first line\n"

        assert await s.decide(ask, "approve") is None

        await s.answer("Added it.")
        assert ran(s.notes) == ["read_note", "append_note"]
        assert s.notes.read_text(encoding="utf-8") == "first line\nhi\n"
        if s.draws_decisions:
            assert says(s.shown(ask), "approved by", s.who("requester"))
            assert "buttons still shown" not in s.shown(ask)
        s.llm.assert_complete()


@pytest.mark.parametrize("kind", SURFACES)
async def test_deny_runs_nothing_and_the_model_is_told_it_was_denied(kind: str, tmp_path: Path) -> None:
    script = [read_and_add(), reply("You denied it, so the note is unchanged.")]
    async with open_surface(kind, tmp_path, script) as s:
        ask = await s.ask("add hi")

        assert await s.decide(ask, "deny") is None

        await s.answer("You denied it, so the note is unchanged.")
        assert ran(s.notes) == ["read_note"]
        assert s.notes.read_text(encoding="utf-8") == "first line\n"
        told = told_the_model(s.llm)
        assert "denied" in told and json.loads(told.partition("\n")[2])["kind"] == "denied"
        if s.draws_decisions:
            assert says(s.shown(ask), "denied by", s.who("requester"))
            assert "buttons still shown" not in s.shown(ask)
        s.llm.assert_complete()


@pytest.mark.parametrize("kind", others(ONE_PERSON))
async def test_a_click_by_someone_else_changes_nothing_and_tells_only_them_but_an_admin_may_decide(
    kind: str, tmp_path: Path
) -> None:
    async with open_surface(kind, tmp_path, [read_and_add(), reply("Added it, as the admin approved.")]) as s:
        ask = await s.ask("add hi")
        before = s.shown(ask)

        assert await s.decide(ask, "approve", "stranger") == NOT_YOURS
        assert ran(s.notes) == ["read_note"]
        assert s.shown(ask) == before, "the ask is not touched"
        assert "buttons still shown" in s.shown(ask)

        assert await s.decide(ask, "approve", "admin") is None, "the admin is told nothing aside"
        await s.answer("Added it, as the admin approved.")
        assert ran(s.notes) == ["read_note", "append_note"]
        assert says(s.shown(ask), "approved by", s.who("admin"))
        s.llm.assert_complete()


@pytest.mark.parametrize(
    "kind", others("a terminal's ask is a prompt: once answered it is gone, nothing to click again")
)
async def test_a_replayed_click_changes_nothing_and_says_it_was_already_decided(
    kind: str, tmp_path: Path
) -> None:
    async with open_surface(kind, tmp_path, [read_and_add(), reply("Added it.")]) as s:
        ask = await s.ask("add hi")
        await s.decide(ask, "approve")
        await s.answer("Added it.")
        answers, shown = s.answers(), s.shown(ask)

        for choice in ("approve", "deny"):
            assert await s.decide(ask, choice) == ALREADY_DECIDED.format(by="")  # type: ignore[arg-type]

        assert ran(s.notes) == ["read_note", "append_note"], "the approved call ran once"
        assert s.answers() == answers == 1, "one answer, given once"
        assert s.shown(ask) == shown
        s.llm.assert_complete()


@pytest.mark.parametrize("kind", SURFACES)
async def test_an_ask_answered_after_it_expired_runs_nothing_and_the_turn_goes_on_without_the_call(
    kind: str, tmp_path: Path
) -> None:
    script = [read_and_add(), reply("Nobody approved it, so I left the note alone.")]
    expires_after = 2.0 if kind == "terminal" else 600.0
    async with open_surface(kind, tmp_path, script, expires_after=expires_after) as s:
        ask = await s.ask("add hi")
        await s.outlive(ask)

        assert await s.decide(ask, "approve") == EXPIRED
        assert ran(s.notes) == ["read_note"]
        await s.sweep()

        await s.answer("Nobody approved it, so I left the note alone.")
        assert ran(s.notes) == ["read_note"]
        assert s.notes.read_text(encoding="utf-8") == "first line\n"
        told = told_the_model(s.llm)
        assert (
            "not approved in time" in told and json.loads(told.partition("\n")[2])["kind"] == "not_approved"
        )
        if s.draws_decisions:
            assert "not approved in time" in s.shown(ask).lower()
            assert "buttons still shown" not in s.shown(ask)
        s.llm.assert_complete()


NO_PARKED_PROMPT = (
    "a terminal's ask is the prompt of the chat that asked: Ctrl-C there denies it, and a new "
    "`nerve chat` does not take up asks a stopped one left, so there is nothing to click after a restart"
)


@pytest.mark.parametrize("kind", others(NO_PARKED_PROMPT))
async def test_an_ask_parked_across_a_restart_is_decided_by_a_click_on_the_new_process(
    kind: str, tmp_path: Path
) -> None:
    async with open_surface(kind, tmp_path, [read_and_add(), reply("Added it after the restart.")]) as s:
        ask = await s.ask("add hi to the note")
        await s.restart()
        assert ran(s.notes) == ["read_note"]

        assert await s.decide(ask, "approve") is None

        await s.answer("Added it after the restart.")
        assert ran(s.notes) == ["read_note", "append_note"]
        assert s.notes.read_text(encoding="utf-8") == "first line\nhi\n"
        assert says(s.shown(ask), "approved by", s.who("requester"))
        assert "buttons still shown" not in s.shown(ask)
        s.llm.assert_complete()


# --- a server's questions: forms and links (the `asks` server, both eras) -----------------------

# A server on 2025-11-25 asks while its call waits; one on 2026-07-28 asks in its call's result and
# the turn parks until the answer goes on with it. People see and answer both the same way.
both_eras = pytest.mark.parametrize("era", ["live", "parked"])
NO_CLOSE_EVENT = (
    "Discord sends nothing when a modal is closed without submitting: a question left alone expires"
)
# What a parked turn says before it goes on: never shown as the question's end or as the answer.
PARKED_TEXT = "Waiting for your answer"


def colour_for(label: str) -> Reply:
    return tool_reply(FakeCall(name="ask_colour", arguments=json.dumps({"label": label}), id="c_colour"))


def returned(llm: object) -> str:
    """What the tool returned, as the model read it: the raw result after the host's preamble."""
    raw = told_the_model(llm).split("Its raw result follows:\n", 1)[-1]
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def no_buttons_left(s: Surface, ask: object) -> bool:
    """Whether the question's message has nothing left to click (the terminal's prompt is gone)."""
    return not s.draws_decisions or "buttons still shown" not in s.shown(ask)


@pytest.mark.parametrize("kind", SURFACES)
@both_eras
async def test_a_form_filled_in_gives_the_tool_the_answer_and_the_turn_goes_on(
    kind: str, era: Era, tmp_path: Path
) -> None:
    script = [colour_for("door"), reply("The door will be blue.")]
    async with open_surface(kind, tmp_path, script, asks=era) as s:
        ask = await s.question("paint the door")
        assert "Pick a colour for door" in s.shown(ask)
        assert s.ended(ask) is None

        await s.fill(ask, {"Colour": "blue"})

        await s.answer("The door will be blue.")
        assert returned(s.llm) == "door: blue", "the tool got exactly what was sent"
        assert s.ended(ask) == "answered"
        assert no_buttons_left(s, ask)
        assert PARKED_TEXT not in s.shown(ask)
        s.llm.assert_complete()


@pytest.mark.parametrize("kind", SURFACES)
@both_eras
async def test_a_form_declined_tells_the_tool_and_the_turn_goes_on(
    kind: str, era: Era, tmp_path: Path
) -> None:
    script = [colour_for("wall"), reply("You declined, so the wall stays as it is.")]
    async with open_surface(kind, tmp_path, script, asks=era) as s:
        ask = await s.question("paint the wall")

        await s.decline(ask)

        await s.answer("You declined, so the wall stays as it is.")
        assert returned(s.llm) == "wall: declined"
        assert s.ended(ask) == "declined"
        assert no_buttons_left(s, ask)
        s.llm.assert_complete()


@pytest.mark.parametrize(
    "kind", ["slack", pytest.param("discord", marks=pytest.mark.skip(reason=NO_CLOSE_EVENT)), "terminal"]
)
@both_eras
async def test_a_form_closed_unsent_tells_the_tool_it_was_cancelled_and_the_turn_goes_on(
    kind: str, era: Era, tmp_path: Path
) -> None:
    script = [colour_for("roof"), reply("No colour for the roof, then.")]
    async with open_surface(kind, tmp_path, script, asks=era) as s:
        ask = await s.question("paint the roof")

        await s.cancel(ask)

        await s.answer("No colour for the roof, then.")
        assert returned(s.llm) == "roof: cancelled"
        assert s.ended(ask) == "cancelled"
        assert no_buttons_left(s, ask)
        assert PARKED_TEXT not in s.shown(ask)
        s.llm.assert_complete()


@pytest.mark.parametrize("kind", SURFACES)
@both_eras
async def test_a_link_opened_by_the_asker_tells_the_tool_and_the_turn_goes_on(
    kind: str, era: Era, tmp_path: Path
) -> None:
    script = [tool_reply(FakeCall(name="sign_in_elsewhere", id="c_link")), reply("Signed in.")]
    async with open_surface(kind, tmp_path, script, asks=era) as s:
        ask = await s.question("read my calendar")
        assert "login.example.com" in s.shown(ask), "the host the link goes to is shown"
        assert "Sign in to Example to let me read your calendar" in s.shown(ask)

        assert await s.open_link(ask) == LOGIN_URL

        await s.answer("Signed in.")
        assert returned(s.llm) == "url accepted"
        # The older era's server says when it has finished with the link: a message says that last.
        if era == "live" and s.draws_decisions:
            assert s.ended(ask) == "done" and "finished with the link" in s.shown(ask)
        else:
            assert s.ended(ask) == "opened"
        assert no_buttons_left(s, ask)
        s.llm.assert_complete()


# --- signing in: the callback lands on another process ------------------------------------------


@pytest.fixture
async def notes_oauth(tmp_path: Path) -> AsyncIterator[RunningServer]:
    """The notes server with its own authorization server, signed in to per person."""
    server = await start_server(tmp_path, "--port", "0")
    try:
        yield server
    finally:
        await stop_server(server)


@pytest.mark.parametrize("kind", SURFACES)
async def test_a_sign_in_finished_on_another_process_lets_the_parked_turn_go_on_and_answer_once(
    kind: str, tmp_path: Path, notes_oauth: RunningServer
) -> None:
    model = Model([tool_reply(FakeCall(name="connect_notes")), whoami(), who_the_tool_said])
    async with open_sign_in_surface(kind, tmp_path, notes_oauth.mcp_url, model) as s:
        link = await s.needs_sign_in("who am I at notes?")
        assert "/authorize?" in link
        assert notes_oauth.log_lines() == [], "nothing was called before the sign-in"

        await s.restart()
        page = await s.finish_sign_in(link)

        assert "Connected to notes" in page
        assert await s.answer("You are signed in to notes as alice.") == 1, "the answer comes once"
        assert notes_oauth.log_lines().count("call whoami by alice") == 1, "the call was theirs, once"
    assert model.moves == [], "every scripted move was used"

"""Approvals in the core: a turn that waits for a person is parked, decided, and resumed.

A scripted model drives a real Agent against the real trust test server (a stdio subprocess) and a
real SQLite store; the server logs every call it runs, so each test sees what really ran.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.agent import Agent, AgentConfig
from bot.asks.deferral import FILES_NOT_KEPT
from bot.asks.parking import ALREADY_DECIDED, CHANGED, EXPIRED, NOT_YOURS
from bot.errors import AskExpired
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.policy.scopes import Place, Rule, Scopes
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, Incoming
from bot.types.files import SharedFile
from tests.answering import decide
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.scripted import Call, ScriptedLLM, Step

# The store-level behaviour of these turns holds on SQLite and on PostgreSQL alike.
pytestmark = pytest.mark.both_stores

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="100.1")
KEY_2 = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="200.1")
REQUESTER, STRANGER, ADMIN = "U1", "U2", "UADMIN"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("first line\n", encoding="utf-8")
    return path


@pytest.fixture
async def host(notes: Path) -> AsyncIterator[MCPHost]:
    env = {"TRUST_NOTES": str(notes), "TRUST_LOG": str(notes.with_suffix(".log"))}
    server = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.trust"],
        cwd=str(ROOT),
        env=env,
        tools={
            "peek": ToolOverride(approval="always"),
            "change_definitions": ToolOverride(approval="never"),
        },
    )
    async with MCPHost({"notes": server}, default_timeout=10.0) as started:
        yield started


def ran(notes: Path) -> list[str]:
    """The tools the server really ran, in order."""
    log = notes.with_suffix(".log")
    if not log.exists():
        return []
    return [json.loads(line)["tool"] for line in log.read_text(encoding="utf-8").splitlines()]


def make_agent(
    llm: ScriptedLLM, host: MCPHost, store: SQLiteStore, clock: Clock | None = None, **config: object
) -> Agent:
    return Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=store,
        approvals=store,
        clock=clock or Clock(1_000_000.0),
        config=AgentConfig(admins=frozenset({ADMIN}), **config),  # type: ignore[arg-type]
    )


def ask(text: str, user: str = REQUESTER, event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id=user, event_id=event_id)


def tool_contents(request: list[ChatMessage]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content or "" for m in request if m.role == "tool"}


async def test_a_read_runs_at_once_while_a_write_of_the_same_reply_waits_for_approval(host, store, notes):
    llm = ScriptedLLM(
        [
            Step(
                text="I'll read the note and add your line.",
                calls=[Call("read_note", {}, id="c_read"), Call("append_note", {"text": "hi"}, id="c_add")],
            )
        ]
    )
    reply = await make_agent(llm, host, store).reply(ask("add hi to the note"))

    assert reply.approval is not None
    assert [(c.call_id, c.tool, c.arguments) for c in reply.approval.calls] == [
        ("c_add", "append_note", {"text": "hi"})
    ]
    assert reply.approval.requester == REQUESTER
    assert reply.approval.reason == "I'll read the note and add your line."
    assert ran(notes) == ["read_note"], "the read-only call runs at once, the write waits"
    assert notes.read_text(encoding="utf-8") == "first line\n"
    assert [a.tool_call_id for a in reply.attachments] == ["c_read"]
    llm.assert_complete()


async def test_approval_by_the_requester_runs_exactly_the_shown_call_and_the_turn_goes_on(host, store, notes):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("read_note", {}, id="c_read"), Call("append_note", {"text": "hi"}, id="c_add")]),
            Step(text="Added it."),
        ]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add hi"))
    assert parked.approval is not None

    decision = await decide(agent, parked.approval.request_id, REQUESTER, approve=True, call_id="c_add")
    assert decision.changed and decision.ready and decision.note is None
    reply = await agent.resume(parked.approval.request_id)

    assert reply is not None and reply.text == "Added it."
    assert ran(notes) == ["read_note", "append_note"]
    assert notes.read_text(encoding="utf-8") == "first line\nhi\n"
    contents = tool_contents(llm.last_request())
    assert list(contents) == ["c_read", "c_add"], "each result under its own id, in call order"
    assert "appended 2 characters" in contents["c_add"]
    assert [a.tool_call_id for a in reply.attachments] == ["c_read", "c_add"]
    assert await agent.resume(parked.approval.request_id) is None, "a turn resumes once"
    llm.assert_complete()


async def test_a_denied_call_never_runs_and_the_model_reads_that_the_user_denied_it(host, store, notes):
    llm = ScriptedLLM(
        [Step(calls=[Call("delete_note", {}, id="c_del")]), Step(text="OK, I left the note alone.")]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("delete the note"))
    assert parked.approval is not None

    await decide(agent, parked.approval.request_id, REQUESTER, approve=False)
    reply = await agent.resume(parked.approval.request_id)

    assert reply is not None and reply.text == "OK, I left the note alone."
    assert ran(notes) == []
    assert notes.exists()
    denied = json.loads(tool_contents(llm.last_request())["c_del"].partition("\n")[2])
    assert denied["kind"] == "denied" and "denied" in denied["error"]
    assert reply.attachments[0].is_error
    assert "was not run" in reply.attachments[0].content
    assert "Do not call" not in reply.attachments[0].content, "the model's instruction is not for people"


async def test_only_the_requester_or_an_admin_can_decide_and_a_replayed_click_changes_nothing(
    host, store, notes
):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")]), Step(text="done")])
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None
    request = parked.approval.request_id

    stranger = await decide(agent, request, STRANGER, approve=True)
    assert not stranger.changed and stranger.note == NOT_YOURS
    admin = await decide(agent, request, ADMIN, approve=True, call_id="c1")
    assert admin.changed and admin.ready
    replay = await decide(agent, request, ADMIN, approve=False, call_id="c1")
    assert not replay.changed and replay.note == ALREADY_DECIDED.format(by=f" by {ADMIN}")
    assert (await agent.resume(request)) is not None
    after = await decide(agent, request, REQUESTER, approve=False, call_id="c1")
    assert not after.changed and after.note is not None
    assert ran(notes) == ["append_note"]


async def test_a_click_bound_to_other_arguments_than_shown_changes_nothing(host, store, notes):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")])])
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None

    decision = await decide(
        agent, parked.approval.request_id, REQUESTER, approve=True, call_id="c1", shown_hash="0" * 64
    )
    assert not decision.changed and decision.note == CHANGED
    good = await decide(
        agent,
        parked.approval.request_id,
        REQUESTER,
        approve=True,
        call_id="c1",
        shown_hash=parked.approval.calls[0].call_hash,
    )
    assert good.changed


async def test_an_expired_request_goes_on_with_not_approved_in_time(host, store, notes):
    clock = Clock(1_000_000.0)
    llm = ScriptedLLM(
        [Step(calls=[Call("append_note", {"text": "late"}, id="c1")]), Step(text="Nobody approved it.")]
    )
    agent = make_agent(llm, host, store, clock, approval_timeout=600.0)
    parked = await agent.reply(ask("add late"))
    assert parked.approval is not None
    clock.now += 601

    with pytest.raises(AskExpired, match=re.escape(EXPIRED)):
        await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    assert await agent.expire_due() == [parked.approval.request_id]
    reply = await agent.resume(parked.approval.request_id)

    assert reply is not None and reply.text == "Nobody approved it."
    with pytest.raises(AskExpired, match=re.escape(EXPIRED)):  # a click after the sweep still says expired
        await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    body = json.loads(tool_contents(llm.last_request())["c1"].partition("\n")[2])
    assert body["kind"] == "not_approved"
    assert ran(notes) == []


async def test_a_parked_turn_resumes_in_a_new_process_after_a_restart(host, notes, store_backend):
    first = await store_backend.open()
    parked = await make_agent(
        ScriptedLLM([Step(calls=[Call("append_note", {"text": "after restart"}, id="c1")])]), host, first
    ).reply(ask("add a line"))
    await first.close()
    assert parked.approval is not None

    second = await store_backend.open()
    try:
        llm = ScriptedLLM([Step(text="Done after the restart.")])
        agent = make_agent(llm, host, second)
        decision = await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
        assert decision.ready
        reply = await agent.resume(parked.approval.request_id)
        assert reply is not None and reply.text == "Done after the restart."
        assert "after restart" in notes.read_text(encoding="utf-8")
        history = await second.history(KEY)
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    finally:
        await second.close()


async def test_a_tool_claiming_read_only_but_configured_always_still_waits(host, store, notes):
    llm = ScriptedLLM([Step(calls=[Call("peek", {}, id="c1")])])
    reply = await make_agent(llm, host, store).reply(ask("peek at the note"))
    assert reply.approval is not None and reply.approval.calls[0].tool == "peek"
    assert ran(notes) == []


async def test_always_allow_here_lasts_until_the_tools_definition_changes(host, store, notes):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("append_note", {"text": "one"}, id="c1")]),
            Step(text="added one"),
            Step(calls=[Call("append_note", {"text": "two"}, id="c2")]),
            Step(text="added two"),
            Step(calls=[Call("change_definitions", {}, id="c3")]),
            Step(text="changed"),
            Step(calls=[Call("append_note", {"text": "three"}, id="c4")]),
        ]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add one"))
    assert parked.approval is not None
    await decide(agent, parked.approval.request_id, REQUESTER, approve=True, remember=True)
    assert (await agent.resume(parked.approval.request_id)) is not None

    second = await agent.reply(ask("add two"))
    assert second.approval is None and second.text == "added two"
    remembered = await store.remembered_approvals()
    assert [(r.place, r.server, r.tool) for r in remembered] == [("slack:C1", "notes", "append_note")]

    before = next(t for t in host.list_tools() if t.original_name == "append_note").definition_hash
    assert (await agent.reply(ask("change it"))).text == "changed"
    async with asyncio.timeout(10):
        await host.wait_for(
            lambda: (
                next(t for t in host.list_tools() if t.original_name == "append_note").definition_hash
                != before
            )
        )
    third = await agent.reply(ask("add three"))
    assert third.approval is not None, "a changed definition asks again"
    assert ran(notes) == ["append_note", "append_note", "change_definitions"]

    outcomes = [(e.tool, e.outcome, e.who) for e in await store.audit_log(KEY)]
    assert ("append_note", "approved, always allowed here", REQUESTER) in outcomes
    assert ("append_note", "auto: always-allowed here", "nerve") in outcomes
    assert ("change_definitions", "auto: approval not required", "nerve") in outcomes


async def test_a_message_written_while_the_turn_waits_is_kept_and_answered_after_it(host, store, notes):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("append_note", {"text": "x"}, id="c1")]),
            Step(text="added"),
            Step(text="the answer to the second question"),
        ]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None

    waiting = await agent.reply(ask("and another thing", event_id="ev2"))
    assert waiting.deferred and waiting.approval is None
    await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    assert (await agent.resume(parked.approval.request_id)) is not None
    answered = [(i.text, r.text) async for i, r in agent.deferred_replies(KEY)]

    assert answered == [("and another thing", "the answer to the second question")]
    roles = [m.role for m in await store.history(KEY)]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [i async for i in agent.deferred_replies(KEY)] == []


async def test_a_tool_the_place_may_not_use_is_never_offered_and_a_call_to_it_is_refused(host, store, notes):
    scopes = Scopes(rules={"slack:C1": Rule(allow=("notes/read_note",))})
    llm = ScriptedLLM([Step(calls=[Call("delete_note", {}, id="c1")]), Step(text="cannot")])
    agent = make_agent(llm, host, store, scopes=scopes)
    place = Place(platform="slack", channel="C1", user=REQUESTER)

    reply = await agent.reply(Incoming(key=KEY, text="delete the note", user_id=REQUESTER, place=place))

    assert [t.original_name for t in llm.tools_seen[0]] == ["read_note"]
    assert reply.approval is None and reply.text == "cannot"
    assert ran(notes) == []
    assert "delete_note" in tool_contents(llm.last_request())["c1"]


async def test_every_automatic_and_personal_decision_is_audited_with_the_conversation(host, store, notes):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("read_note", {}, id="c_read"), Call("append_note", {"text": "y"}, id="c_add")]),
            Step(text="done"),
        ]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("read and add"))
    assert parked.approval is not None
    await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    await agent.resume(parked.approval.request_id)

    log = await store.audit_log(KEY)
    assert [(e.call_id, e.who, e.outcome) for e in log] == [
        ("c_read", "nerve", "auto: read-only"),
        ("c_add", REQUESTER, "approved"),
    ]
    assert all(e.place == "slack:C1" and len(e.arguments_hash) == 64 for e in log)


async def test_after_a_restart_decided_requests_and_ones_a_stopped_process_was_resuming_go_on(
    host, store, notes
):
    clock = Clock(1_000_000.0)
    llm = ScriptedLLM(
        [
            Step(calls=[Call("append_note", {"text": "a"}, id="c1")]),
            Step(calls=[Call("append_note", {"text": "b"}, id="c2")]),
        ]
    )
    agent = make_agent(llm, host, store, clock)
    decided = await agent.reply(ask("add a"))
    claimed = await agent.reply(Incoming(key=KEY_2, text="add b", user_id=REQUESTER))
    assert decided.approval is not None and claimed.approval is not None
    await decide(agent, decided.approval.request_id, REQUESTER, approve=True)
    await decide(agent, claimed.approval.request_id, REQUESTER, approve=False)
    # A process took the second one for resuming, then stopped before storing its round.
    assert await store.claim(claimed.approval.request_id, clock.now) is not None

    restarted = make_agent(ScriptedLLM([Step(text="b was denied")]), host, store, clock)
    assert await restarted.recover_parked("slack") == [
        decided.approval.request_id,
        claimed.approval.request_id,
    ]
    assert await restarted.recover_parked("discord") == [], "each front end takes up its own"
    reply = await restarted.resume(claimed.approval.request_id)
    assert reply is not None and reply.text == "b was denied"


async def test_the_sweep_of_one_front_end_leaves_another_platforms_requests_alone(host, store, notes):
    clock = Clock(1_000_000.0)
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")])])
    agent = make_agent(llm, host, store, clock)
    other = ConversationKey(platform="discord", workspace="G1", channel="C9", thread="T9")
    parked = await agent.reply(Incoming(key=other, text="add x", user_id=REQUESTER))
    assert parked.approval is not None
    clock.now += 10_000
    assert await agent.expire_due("slack") == []
    assert await agent.expire_due("discord") == [parked.approval.request_id]


async def test_a_call_whose_tool_changed_after_it_was_shown_does_not_run(host, store, notes):
    llm = ScriptedLLM(
        [Step(calls=[Call("append_note", {"text": "x"}, id="c1")]), Step(text="it changed, so not run")]
    )
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None
    before = next(t for t in host.list_tools() if t.original_name == "append_note").definition_hash
    await host.call_tool("change_definitions", {})
    async with asyncio.timeout(10):
        await host.wait_for(
            lambda: (
                next(t for t in host.list_tools() if t.original_name == "append_note").definition_hash
                != before
            )
        )
    await decide(agent, parked.approval.request_id, REQUESTER, approve=True, remember=True)
    reply = await agent.resume(parked.approval.request_id)

    assert reply is not None and reply.text == "it changed, so not run"
    assert "append_note" not in ran(notes)
    assert await store.remembered_approvals() == [], "a definition nobody saw is not always-allowed"


async def test_a_reset_ends_the_parked_turn_and_the_next_message_is_answered_at_once(host, store, notes):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")]), Step(text="fresh answer")])
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None

    await agent.reset(KEY)
    reply = await agent.reply(ask("a new question"))

    assert reply.text == "fresh answer" and not reply.deferred
    with pytest.raises(AskExpired):  # nothing changed: the reset ended the request
        await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    assert ran(notes) == []


async def test_a_message_too_long_while_the_turn_waits_waits_behind_it_instead_of_entering_its_round(
    host, store, notes
):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")])])
    agent = make_agent(llm, host, store, max_question_chars=100)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None

    reply = await agent.reply(ask("y" * 500))

    assert reply.deferred
    assert [m.role for m in await store.history(KEY)] == ["user"]


async def test_a_message_with_files_written_while_the_turn_waits_says_its_files_are_not_kept(
    host, store, notes
):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")])])
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x"))
    assert parked.approval is not None

    async def fetch(max_bytes: int) -> bytes:
        raise AssertionError("a waiting message's file is not fetched")

    shared = SharedFile(name="notes.csv", fetch=fetch, size=10, mime="text/csv")
    waiting = await agent.reply(replace(ask("and this file", event_id="ev2"), files=(shared,)))

    assert waiting.deferred and waiting.text.endswith(FILES_NOT_KEPT)
    # It waits as text alone: its platform's fetch cannot be stored.
    found = await store.next_deferred(KEY)
    assert found is not None and found[1].text == "and this file" and found[1].files == ()

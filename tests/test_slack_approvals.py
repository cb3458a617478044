"""Approvals on Slack: one approval message per parked turn, signed clicks, expiry, and the commands.

The real bolt app serves signed HTTP deliveries (events and form-encoded `block_actions`) and talks
to the mock Slack Web API; the real trust test server runs as a stdio subprocess and logs every call
it really ran; the model is the local fake model service.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.slack.approval_view import approval_message, argument_uploads
from adapters.slack.events import Identity, classify, inbox_payload
from bot.agent import AgentConfig
from bot.asks.deferral import DEFERRED_REPLY
from bot.asks.parking import EXPIRED
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.policy.scopes import Place, Rule, Scopes
from bot.types import ApprovalPrompt, ConversationKey, PendingCall, ToolResult
from tests.answering import decide
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeCall, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, Posted
from tests.test_slack_harness import Rig, dm, mention, rig, sign, user_texts

CHANNEL = "C0CHANNEL"
ALICE, BOB, ADMIN = "U0ALICE", "U0BOB", "U0ADMIN"
ADMINS = frozenset({ADMIN})


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
    )
    async with MCPHost({"notes": server}, default_timeout=10.0) as started:
        yield started


def ran(notes: Path) -> list[str]:
    log = notes.with_suffix(".log")
    if not log.exists():
        return []
    return [json.loads(line)["tool"] for line in log.read_text(encoding="utf-8").splitlines()]


def read_and_add(text: str = "hi") -> Any:
    return tool_reply(
        FakeCall(name="read_note", id="c_read"),
        FakeCall(name="append_note", arguments=json.dumps({"text": text}), id="c_add"),
        content="I'll read the note and add your line.",
    )


def approval_messages(r: Rig, thread: str, channel: str = CHANNEL) -> list[Posted]:
    return [p for p in r.slack.thread(channel, thread) if "nerve_approval" in json.dumps(p.versions[0])]


def buttons(message: Posted) -> list[dict[str, Any]]:
    return [
        element
        for block in message.current.get("blocks") or []
        if block.get("type") == "actions"
        for element in block["elements"]
    ]


def button(message: Posted, choice: str, index: int | None = None) -> dict[str, Any]:
    wanted = f"nerve_approval.{choice}" + (f".{index}" if index is not None else "")
    [found] = [b for b in buttons(message) if b["action_id"] == wanted]
    return found


def click_payload(message: Posted, pressed: dict[str, Any], user: str) -> dict[str, Any]:
    """A `block_actions` body as Slack sends it when `user` presses `pressed` on `message`."""
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
        "trigger_id": "1.2.3",
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
        "actions": [
            {
                "type": "button",
                "action_id": pressed["action_id"],
                "block_id": "b",
                "value": pressed["value"],
                "action_ts": "1700000000.000001",
            }
        ],
    }


async def click(r: Rig, message: Posted, pressed: dict[str, Any], user: str) -> int:
    """POST the signed, form-encoded click; returns the HTTP status of the ack."""
    raw = urlencode({"payload": json.dumps(click_payload(message, pressed, user))})
    status, _ = await r.deliver_raw(raw, "application/x-www-form-urlencoded")
    await r.settle()
    return status


def ephemerals(r: Rig, user: str) -> list[str]:
    return [str(c.body["text"]) for c in r.slack.calls_of("chat.postEphemeral") if c.body["user"] == user]


def command(text: str, user: str, channel: str = CHANNEL) -> str:
    return urlencode(
        {
            "command": "/nerve",
            "text": text,
            "team_id": TEAM_ID,
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": user.lower(),
            "trigger_id": "1.2.3",
            "response_url": "http://127.0.0.1:9/unused",
            "token": "legacy",
        }
    )


async def ask(r: Rig, text: str, root: str, user: str = ALICE) -> Posted:
    """Mention the bot at `root`; returns the one approval message its turn posted."""
    await r.deliver(mention(f"<@{BOT_USER_ID}> {text}", ts=root, user=user))
    await r.settle()
    [message] = approval_messages(r, root)
    return message


async def test_a_mention_that_reads_and_writes_runs_the_read_and_posts_one_approval_message(
    tmp_path, host, notes
):
    async with rig(tmp_path, [read_and_add()], host=host, approvals=True) as r:
        root = "1600000000.100100"
        body = mention(f"<@{BOT_USER_ID}> add hi to the note", ts=root)
        await r.deliver(body)
        await r.settle()
        # Slack retries the same event: acked, and no second approval message.
        assert await r.deliver(body, retry_num=1) == 200
        await r.settle()

        assert ran(notes) == ["read_note"]
        assert notes.read_text(encoding="utf-8") == "first line\n"
        status, approval = r.slack.thread(CHANNEL, root)
        assert status.text == "Waiting for approval to run append_note."
        assert "read_note" in json.dumps(status.current["blocks"]), "the read's result is shown"
        shown = json.dumps(approval.current["blocks"], ensure_ascii=False)
        assert "append_note" in shown and "notes" in shown and '\\"text\\": \\"hi\\"' in shown
        assert "I'll read the note and add your line." in shown
        assert f"<@{ALICE}> (who asked) or an admin can decide" in shown and "<!date^" in shown
        assert {b["action_id"] for b in buttons(approval)} == {
            "nerve_approval.approve.0",
            "nerve_approval.deny.0",
            "nerve_approval.always",
        }
        value = json.loads(button(approval, "approve", 0)["value"])
        prompt, _ = await r.store.prompt(value["r"])  # type: ignore[misc]
        assert value == {"r": prompt.request_id, "c": "c_add", "h": prompt.calls[0].call_hash}
        assert prompt.message_ref == f"{CHANNEL}:{approval.ts}"


async def test_approval_by_the_requester_runs_the_call_updates_the_message_and_answers_in_the_thread(
    tmp_path, host, notes
):
    async with rig(tmp_path, [read_and_add(), reply("Added it.")], host=host, approvals=True) as r:
        root = "1600000000.100200"
        approval = await ask(r, "add hi to the note", root)

        assert await click(r, approval, button(approval, "approve", 0), ALICE) == 200

        assert ran(notes) == ["read_note", "append_note"]
        assert notes.read_text(encoding="utf-8") == "first line\nhi\n"
        assert buttons(approval) == [], "nothing is pending, so the buttons are gone"
        assert f"Approved by <@{ALICE}>" in json.dumps(approval.current["blocks"])
        answer = r.slack.thread(CHANNEL, root)[-1]
        assert answer.text == "Added it."
        titles = [b["title"]["text"] for b in answer.current["blocks"] if b["type"] == "container"]
        assert titles == ["read_note · notes", "append_note · notes"], (
            "tool results attached as for any answer"
        )
        assert r.slack.calls_of("chat.postEphemeral") == []
        assert len(approval_messages(r, root)) == 1


async def test_a_click_after_expiry_changes_nothing_and_the_sweep_shows_it_expired_and_answers(
    tmp_path, host, notes
):
    clock = Clock(1_900_000_000.0)
    steps = [read_and_add(), reply("Nobody approved it, so I left the note alone.")]
    async with rig(tmp_path, steps, host=host, approvals=True, clock=clock) as r:
        root = "1600000000.100500"
        approval = await ask(r, "add hi", root)
        clock.now += 601

        await click(r, approval, button(approval, "approve", 0), ALICE)
        assert ephemerals(r, ALICE) == [EXPIRED]
        assert ran(notes) == ["read_note"]

        assert len(await r.bot.sweep()) == 1
        await r.settle()
        assert "Expired — not approved in time" in json.dumps(approval.current["blocks"], ensure_ascii=False)
        assert buttons(approval) == []
        assert r.slack.thread(CHANNEL, root)[-1].text == "Nobody approved it, so I left the note alone."
        assert ran(notes) == ["read_note"]
        assert await r.bot.sweep() == []


def two_writes() -> Any:
    return tool_reply(
        FakeCall(name="append_note", arguments='{"text": "one"}', id="c_one"),
        FakeCall(name="append_note", arguments='{"text": "two"}', id="c_two"),
    )


async def test_approve_all_runs_every_call_of_the_batch(tmp_path, host, notes):
    async with rig(tmp_path, [two_writes(), reply("Both added.")], host=host, approvals=True) as r:
        root = "1600000000.100700"
        approval = await ask(r, "add one and two", root)
        assert {"nerve_approval.approve_all", "nerve_approval.deny_all"} <= {
            b["action_id"] for b in buttons(approval)
        }

        await click(r, approval, button(approval, "approve_all"), ALICE)

        # The two approved calls run at once: either may write first.
        lines = notes.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "first line" and sorted(lines[1:]) == ["one", "two"]
        assert json.dumps(approval.current["blocks"]).count("Approved by") == 2
        assert r.slack.thread(CHANNEL, root)[-1].text == "Both added."


async def test_deny_all_runs_nothing_and_one_decision_per_call_keeps_the_rest_waiting(tmp_path, host, notes):
    async with rig(tmp_path, [two_writes(), reply("Neither added.")], host=host, approvals=True) as r:
        root = "1600000000.100800"
        approval = await ask(r, "add one and two", root)

        await click(r, approval, button(approval, "deny", 1), ALICE)
        assert {b["action_id"] for b in buttons(approval)} >= {"nerve_approval.approve.0"}
        assert "nerve_approval.deny.1" not in {b["action_id"] for b in buttons(approval)}
        assert len(r.llm.requests) == 1, "the turn waits while a call is open"

        await click(r, approval, button(approval, "deny_all"), ALICE)

        assert notes.read_text(encoding="utf-8") == "first line\n" and ran(notes) == []
        assert buttons(approval) == []
        assert r.slack.thread(CHANNEL, root)[-1].text == "Neither added."


async def test_always_allow_here_approves_and_the_next_call_in_this_channel_runs_without_asking(
    tmp_path, host, notes
):
    steps = [
        tool_reply(FakeCall(name="append_note", arguments='{"text": "one"}', id="c1")),
        reply("added one"),
        tool_reply(FakeCall(name="append_note", arguments='{"text": "two"}', id="c2")),
        reply("added two"),
    ]
    async with rig(tmp_path, steps, host=host, approvals=True) as r:
        root = "1600000000.100900"
        approval = await ask(r, "add one", root)
        await click(r, approval, button(approval, "always"), ALICE)
        assert r.slack.thread(CHANNEL, root)[-1].text == "added one"

        second = "1600000000.101000"
        await r.deliver(mention(f"<@{BOT_USER_ID}> add two", ts=second))
        await r.settle()

        assert approval_messages(r, second) == []
        assert [p.text for p in r.slack.thread(CHANNEL, second)] == ["added two"]
        assert notes.read_text(encoding="utf-8") == "first line\none\ntwo\n"
        [remembered] = await r.store.remembered_approvals()
        assert (remembered.place, remembered.tool, remembered.granted_by) == (
            f"slack:{CHANNEL}",
            "append_note",
            ALICE,
        )


async def test_a_message_in_the_thread_while_waiting_gets_the_notice_and_is_answered_after_the_decision(
    tmp_path, host, notes
):
    steps = [read_and_add(), reply("Added it."), reply("The note has two lines now.")]
    async with rig(tmp_path, steps, host=host, approvals=True) as r:
        root = "1600000000.101100"
        approval = await ask(r, "add hi", root)
        await r.deliver(mention(f"<@{BOT_USER_ID}> how long is the note?", thread_ts=root))
        await r.settle()
        assert r.slack.thread(CHANNEL, root)[-1].text == DEFERRED_REPLY
        assert len(r.llm.requests) == 1

        await click(r, approval, button(approval, "approve", 0), ALICE)

        texts = [p.text for p in r.slack.thread(CHANNEL, root)]
        assert texts[-2:] == ["Added it.", "The note has two lines now."]
        assert user_texts(r.llm.requests[-1])[-1] == "how long is the note?"


async def test_a_click_with_a_bad_signature_is_refused_and_decides_nothing(tmp_path, host, notes):
    async with rig(tmp_path, [read_and_add()], host=host, approvals=True) as r:
        root = "1600000000.101200"
        approval = await ask(r, "add hi", root)
        raw = urlencode(
            {"payload": json.dumps(click_payload(approval, button(approval, "approve", 0), ALICE))}
        )
        headers = sign(raw, "not-the-secret")
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        async with r.http.post(r.url, data=raw, headers=headers) as response:
            assert response.status == 401
        await r.settle()
        assert ran(notes) == ["read_note"] and len(approval.versions) == 1


async def test_slash_approvals_lists_and_revokes_for_admins_and_refuses_others(tmp_path, host, notes):
    steps = [tool_reply(FakeCall(name="append_note", arguments='{"text": "one"}', id="c1")), reply("added")]
    config = AgentConfig(admins=ADMINS)
    async with rig(tmp_path, steps, host=host, approvals=True, config=config, nerve_admins=ADMIN) as r:
        approval = await ask(r, "add one", "1600000000.101300")
        await click(r, approval, button(approval, "always"), ALICE)

        status, text = await r.deliver_raw(command("approvals", ALICE), "application/x-www-form-urlencoded")
        body = json.loads(text)
        assert status == 200 and body["response_type"] == "ephemeral"
        assert "Only admins" in body["text"] and "append_note" not in body["text"]

        _, text = await r.deliver_raw(command("approvals", ADMIN), "application/x-www-form-urlencoded")
        listed = json.loads(text)
        assert listed["response_type"] == "ephemeral"
        assert f"/nerve approvals revoke slack:{CHANNEL} notes append_note" in listed["text"]

        revoke = f"approvals revoke slack:{CHANNEL} notes append_note"
        _, text = await r.deliver_raw(command(revoke, ALICE), "application/x-www-form-urlencoded")
        assert "Only admins" in json.loads(text)["text"]
        assert len(await r.store.remembered_approvals()) == 1
        _, text = await r.deliver_raw(command(revoke, ADMIN), "application/x-www-form-urlencoded")
        assert "Revoked" in json.loads(text)["text"]
        assert await r.store.remembered_approvals() == []


async def test_slash_tools_shows_only_the_tools_this_channel_may_use(tmp_path):
    scopes = Scopes(rules={"slack:C0SECRET": Rule(deny=("static",))})
    tools = {"get_environment_status": lambda a: ToolResult(content="{}")}
    async with rig(tmp_path, [], tools=tools, config=AgentConfig(scopes=scopes)) as r:
        _, text = await r.deliver_raw(
            command("tools", ALICE, "C0SECRET"), "application/x-www-form-urlencoded"
        )
        hidden = json.loads(text)["text"]
        _, text = await r.deliver_raw(command("tools", ALICE, CHANNEL), "application/x-www-form-urlencoded")
        shown = json.loads(text)["text"]
    assert "get_environment_status" not in hidden and "No tools are allowed in this place" in hidden
    assert "get_environment_status" in shown


def test_every_slack_turn_names_its_place_channel_or_dm_and_the_user():
    me = Identity(user_id=BOT_USER_ID)

    def place_of(body: dict[str, Any]) -> Place | None:
        turn = classify(body, me, allow_bots=False, follow_threads=False, followed=lambda _k: False)
        assert turn is not None
        return turn.incoming.place

    assert place_of(mention(f"<@{BOT_USER_ID}> hi", user=BOB)) == Place(
        platform="slack", channel=CHANNEL, user=BOB, team=TEAM_ID
    )
    assert place_of(dm("hi", channel="D0BOB", user=BOB)) == Place(
        platform="slack", channel="D0BOB", dm=True, user=BOB, team=TEAM_ID
    )


async def test_a_dm_policy_keeps_a_server_from_the_model_in_dms(tmp_path):
    scopes = Scopes(rules={"slack:dm": Rule(deny=("static",))})
    tools = {"get_environment_status": lambda a: ToolResult(content="{}")}
    async with rig(
        tmp_path,
        [reply("no tools here"), reply("here I have them")],
        tools=tools,
        config=AgentConfig(scopes=scopes),
    ) as r:
        await r.deliver(dm("hello"))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.101400"))
        await r.settle()
        assert "tools" not in r.llm.requests[0]
        assert [t["function"]["name"] for t in r.llm.requests[1]["tools"]] == ["get_environment_status"]


def request_of(approval: Posted) -> str:
    return str(json.loads(button(approval, "always")["value"])["r"])


async def test_at_start_a_request_decided_before_a_stop_is_resumed_and_answered_in_its_thread(
    tmp_path, host, notes
):
    async with rig(tmp_path, [read_and_add(), reply("Added it.")], host=host, approvals=True) as r:
        root = "1600000000.101500"
        approval = await ask(r, "add hi", root)
        # Decided in the database by a process that stopped before the turn went on.
        assert (await decide(r.agent, request_of(approval), ALICE, approve=True)).ready

        assert await r.bot.recover() == 1
        await r.settle()

        assert r.slack.thread(CHANNEL, root)[-1].text == "Added it."
        assert f"Approved by <@{ALICE}>" in json.dumps(approval.current["blocks"])
        assert notes.read_text(encoding="utf-8") == "first line\nhi\n"


async def test_at_start_messages_that_waited_behind_a_turn_finished_before_a_stop_are_answered(
    tmp_path, host, notes
):
    steps = [read_and_add(), reply("Added it."), reply("The note has two lines now.")]
    async with rig(tmp_path, steps, host=host, approvals=True) as r:
        root = "1600000000.101600"
        approval = await ask(r, "add hi", root)
        await r.deliver(mention(f"<@{BOT_USER_ID}> how long is the note?", thread_ts=root))
        await r.settle()
        # The turn went on in a process that stopped before answering the message that waited.
        await decide(r.agent, request_of(approval), ALICE, approve=True)
        assert await r.agent.resume(request_of(approval)) is not None

        assert await r.bot.recover() == 1
        await r.settle()

        assert r.slack.thread(CHANNEL, root)[-1].text == "The note has two lines now."
        assert user_texts(r.llm.requests[-1])[-1] == "how long is the note?"


async def test_an_event_whose_turn_parked_before_a_restart_gets_its_one_approval_message_at_start(
    tmp_path, host, notes
):
    async with rig(tmp_path, [read_and_add(), reply("Added it.")], host=host, approvals=True) as r:
        root = "1600000000.101700"
        body = mention(f"<@{BOT_USER_ID}> add hi", ts=root)
        # A process claimed the event and parked its turn, then stopped before posting anything.
        assert await r.store.claim_event("slack", body["event_id"], inbox_payload(body))
        turn = classify(
            body, Identity(user_id=BOT_USER_ID), allow_bots=False, follow_threads=False, followed=bool
        )
        assert turn is not None and (await r.agent.reply(turn.incoming)).approval is not None

        await r.bot.recover()
        await r.settle()

        texts = [p.text for p in r.slack.thread(CHANNEL, root)]
        assert DEFERRED_REPLY not in texts
        [approval] = approval_messages(r, root)
        assert await r.store.unfinished_events("slack") == []
        await click(r, approval, button(approval, "approve", 0), ALICE)
        texts = [p.text for p in r.slack.thread(CHANNEL, root)]
        assert texts.count("Added it.") == 1 and DEFERRED_REPLY not in texts
        assert ran(notes) == ["read_note", "append_note"]


def prompt_with(calls: list[PendingCall], reason: str = "") -> ApprovalPrompt:
    return ApprovalPrompt(
        request_id="r" * 16,
        key=ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1.2"),
        requester=ALICE,
        place=f"slack:{CHANNEL}",
        calls=tuple(calls),
        reason=reason,
        expires_at=1_900_000_600.0,
    )


def write_call(index: int, text: str) -> PendingCall:
    return PendingCall(
        call_id=f"c{index}",
        server="notes",
        tool="append_note",
        arguments={"text": text},
        call_hash=f"{index:064d}",
    )


def test_long_arguments_are_cut_in_the_message_and_sent_whole_as_a_file_within_slacks_limits():
    long_text = "<!here> " + "x" * 9_000
    prompt = prompt_with([write_call(0, long_text)], reason="why " * 2_000)

    message = approval_message(prompt)
    [upload] = argument_uploads(prompt)

    assert json.loads(upload.content) == {"text": long_text}
    sections = [b["text"]["text"] for b in message.blocks or [] if b["type"] == "section"]
    assert all(len(text) <= 3_000 for text in sections)
    assert any("full arguments are in the file" in text for text in sections)
    assert "<!here>" not in json.dumps(message.blocks), "model-written text never pings"
    assert all(len(b["value"]) <= 2_000 for b in buttons_of(message))


def test_a_batch_of_many_calls_stays_within_fifty_blocks_and_every_call_is_shown_or_filed():
    prompt = prompt_with([write_call(i, f"line {i}") for i in range(30)])

    message = approval_message(prompt)

    assert len(message.blocks or []) <= 50
    assert len(argument_uploads(prompt)) == 10, "the calls not drawn one by one go up as files"
    assert {"nerve_approval.approve_all", "nerve_approval.deny_all", "nerve_approval.always"} <= {
        b["action_id"] for b in buttons_of(message)
    }


def buttons_of(message: Any) -> list[dict[str, Any]]:
    return [e for b in message.blocks or [] if b["type"] == "actions" for e in b["elements"]]


def test_the_app_manifest_turns_on_interactivity_so_slack_delivers_button_clicks():
    manifest = (ROOT / "slack" / "manifest.socket.yaml").read_text(encoding="utf-8")
    interactivity = manifest.split("interactivity:", 1)[1].split("\n")[1].strip()
    assert interactivity == "is_enabled: true"
    assert "approvals" in manifest.split("usage_hint:", 1)[1].split("\n", 1)[0]

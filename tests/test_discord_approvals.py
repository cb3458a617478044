"""Approvals on Discord end to end: real discord.py against the fake Discord (gateway and REST), the
real Agent and SQLite store, the real trust MCP server over stdio, and the real `openai` client
against a scripted model service. The trust server logs every call it runs, so each test sees what
really ran, and the fake records what Discord received."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.app import NerveDiscordBot
from adapters.discord.approvals import TEMPLATE
from adapters.discord.delivery import CUSTOM_ID_LIMIT
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.model.client import OpenAILLM
from bot.policy.scopes import Rule, Scopes
from bot.store.sqlite import SQLiteStore
from tests.answering import decide
from tests.conftest import ROOT, stdio_server
from tests.fakes.clock import Clock
from tests.fakes.discord_api import FakeDiscord, FakeUser, Recorded, running_bot
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, reply, tool_reply
from tests.test_discord_bot import WatchedInbox

CALLBACK = r"/interactions/\d+/[^/]+/callback"
THREADS = r"/channels/\d+/messages/\d+/threads"
ORIGINAL = r"/webhooks/\d+/[^/]+/messages/@original"
# Discord drops a response after 3 s (`bench/discord_bench.py` holds that figure). That the click is
# acknowledged before any work is checked by order; this bound, generous so a busy machine passes,
# only catches an acknowledgement that waited for something slow.
ACK_GIVE_UP = 15.0


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("first line\n", encoding="utf-8")
    return path


def trust_server(notes: Path) -> ServerConfig:
    env = {"TRUST_NOTES": str(notes), "TRUST_LOG": str(notes.with_suffix(".log"))}
    return ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.trust"],
        cwd=str(ROOT),
        env=env,
        tools={"change_definitions": ToolOverride(approval="never")},
    )


@pytest.fixture
async def host(notes: Path) -> AsyncIterator[MCPHost]:
    async with MCPHost({"notes": trust_server(notes)}, default_timeout=10.0) as started:
        yield started


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def admin(fake: FakeDiscord) -> FakeUser:
    return fake.user("admin")


def note(notes: Path) -> str | None:
    """The note's text, None once it was deleted."""
    return notes.read_text(encoding="utf-8") if notes.exists() else None


def ran(notes: Path) -> list[str]:
    """The tools the server really ran, in order."""
    log = notes.with_suffix(".log")
    if not log.exists():
        return []
    return [json.loads(line)["tool"] for line in log.read_text(encoding="utf-8").splitlines()]


@contextlib.asynccontextmanager
async def approving_agent(
    llm_server: FakeLLMServer,
    store: SQLiteStore,
    host: MCPHost,
    *,
    admins: tuple[FakeUser, ...] = (),
    clock: Clock | None = None,
    scopes: Scopes | None = None,
    inbox: Any = None,
    inputs: Any = None,
) -> AsyncIterator[Agent]:
    """The real Agent with approvals on (and servers' questions, given `inputs`), its model the
    real OpenAI client talking to the fake."""
    llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
    config = AgentConfig(admins=frozenset(str(a.id) for a in admins), scopes=scopes or Scopes())
    try:
        yield Agent(
            llm=llm,
            host=host,
            store=store,
            inbox=inbox or store,
            approvals=store,
            inputs=inputs,
            config=config,
            clock=clock or time.time,
        )
    finally:
        await llm.aclose()


def bot_settings(*admins: FakeUser) -> dict[str, Any]:
    return {"nerve_admins": ",".join(str(a.id) for a in admins)}


def read_and_append(text: str = "hi", reason: str | None = "I'll read the note and add your line.") -> Reply:
    return tool_reply(
        FakeCall(name="read_note", arguments="{}", id="c_read"),
        FakeCall(name="append_note", arguments=json.dumps({"text": text}), id="c_add"),
        content=reason,
    )


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """The message's buttons, label → custom_id."""
    return {c["label"]: c["custom_id"] for row in message.get("components") or [] for c in row["components"]}


def is_approval(message: dict[str, Any]) -> bool:
    return any(i.startswith("nerve:ap:") for i in buttons(message).values()) or (
        "approval" in (message.get("content") or "").lower() and bool(message.get("embeds"))
    )


async def approval_in(fake: FakeDiscord, channel_id: int, count: int = 1) -> dict[str, Any]:
    """The newest approval message the bot posted in the channel, once there are `count` of them."""

    def found() -> list[dict[str, Any]]:
        return [m for m in fake.bot_messages(channel_id) if is_approval(m)]

    await fake.wait_until(lambda: len(found()) >= count)
    return found()[-1]


async def click(fake: FakeDiscord, user: FakeUser, message: dict[str, Any], label: str) -> dict[str, Any]:
    """Click a button and check that the click was acknowledged first, well within Discord's 3 s."""
    custom_id = buttons(message)[label]
    before = len(fake.requests)
    sent_at = asyncio.get_running_loop().time()
    interaction = await fake.click(user, message, custom_id)
    path = f"/interactions/{interaction['id']}/{interaction['token']}/callback"
    await fake.wait_for("POST", re.escape(path), within=ACK_GIVE_UP)
    # The turn that posted the approval may still be talking to Discord (opening its thread, say),
    # so only what the click can cause counts: anything about this interaction or this message.
    keys = (interaction["token"], message["id"])
    caused = [r for r in fake.requests[before:] if any(key in r.path for key in keys)]
    first = caused[0]
    assert first.path == path, f"the first request after the click was {first.method} {first.path}"
    assert first.body()["type"] == 6, "a deferred update: the click is acknowledged before any work"
    assert first.at - sent_at < ACK_GIVE_UP
    return interaction


async def ephemeral_note(fake: FakeDiscord, interaction: dict[str, Any]) -> str:
    (note,) = await fake.wait_for("POST", rf"/webhooks/\d+/{re.escape(interaction['token'])}")
    assert note.body()["flags"] & 64, "only the clicker sees the note"
    return str(note.body()["content"])


async def posted_in(fake: FakeDiscord, channel_id: int, count: int = 1) -> list[Recorded]:
    return await fake.wait_for("POST", rf"/channels/{channel_id}/messages", count=count, within=20)


def edits_of(fake: FakeDiscord, interaction: dict[str, Any]) -> list[Recorded]:
    return fake.find("PATCH", rf"/webhooks/\d+/{re.escape(interaction['token'])}/messages/@original")


# --- one approval message, and the requester approving it ---------------------------------------------


async def test_a_mention_whose_reply_writes_posts_one_approval_message_and_approve_runs_it_then_answers(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    script = [read_and_append(), reply("Added your line.")]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add hi to the note", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)
        await fake.wait_for("POST", THREADS)

        (posted,) = fake.find("POST", rf"/channels/{fake.channel_id}/messages")
        assert int(posted.body()["message_reference"]["message_id"]) == int(mention["id"])
        assert posted.body()["allowed_mentions"]["parse"] == []
        content = approval["content"]
        assert "Waiting for approval" in content and "append_note" in content
        assert "I'll read the note and add your line." in content, "the model's reason"
        assert f"<@{ada.id}> or an admin" in content, "who may decide"
        assert re.search(r"<t:\d+:R>", content), "when it expires"
        (embed,) = approval["embeds"]
        assert embed["title"] == "1. append_note"
        assert '"text": "hi"' in embed["description"], "the arguments in full"
        assert {"name": "Server", "value": "notes", "inline": True} in embed["fields"]
        assert set(buttons(approval)) == {"Approve", "Deny", "Always allow here"}
        assert all(
            len(i) <= CUSTOM_ID_LIMIT and re.fullmatch(TEMPLATE, i) for i in buttons(approval).values()
        )
        assert ran(notes) == ["read_note"], "the read runs at once, the write waits"
        assert note(notes) == "first line\n"
        assert await store.ready_requests() == [], "nothing is decided yet"

        interaction = await click(fake, ada, approval, "Approve")
        answers = await posted_in(fake, int(mention["id"]))
        assert answers[0].body()["content"].startswith("Added your line.")
        assert "🔧 read_note · notes ✓" in answers[0].body()["content"]
        assert "🔧 append_note · notes ✓" in answers[0].body()["content"]
        assert buttons(answers[0].body())["Tool results"].startswith("nerve:tools:")
        assert note(notes) == "first line\nhi\n"
        assert ran(notes) == ["read_note", "append_note"]

        (edit,) = edits_of(fake, interaction)
        assert edit.body()["components"] == [], "the buttons go away once nothing waits"
        assert f"approved by <@{ada.id}>" in json.dumps(edit.body()["embeds"])
        assert "Decided" in edit.body()["content"]
        llm.assert_complete()


async def test_a_message_ref_is_stored_so_any_process_can_update_the_approval_message(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost
) -> None:
    async with (
        FakeLLMServer([read_and_append()]) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        await fake.user_dms(ada, "add hi")
        dm = fake.dm_channels[ada.id]
        approval = await approval_in(fake, dm)
        request_id = buttons(approval)["Approve"].split(":")[3]
        # A second message in the same DM is handled only after the first delivery is done.
        await fake.user_dms(ada, "still there?")
        await posted_in(fake, dm, count=2)
        found = await store.prompt(request_id)
        assert found is not None
        assert found[0].message_ref == f"{dm}:{approval['id']}"
        assert found[0].place == f"discord:{dm}", "a DM is its own place"


# --- who may decide ------------------------------------------------------------------------------------


# --- deny, approve all, deny all -----------------------------------------------------------------------


async def test_deny_in_a_dm_leaves_the_note_alone_and_the_model_answers_without_the_call(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    script = [
        tool_reply(FakeCall(name="delete_note", arguments="{}", id="c_del")),
        reply("OK, I left the note alone."),
    ]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        await fake.user_dms(ada, "delete the note")
        dm = fake.dm_channels[ada.id]
        approval = await approval_in(fake, dm)
        assert "delete_note" in approval["content"]

        interaction = await click(fake, ada, approval, "Deny")
        answers = await posted_in(fake, dm, count=2)
        assert answers[-1].body()["content"].startswith("OK, I left the note alone.")
        assert note(notes) == "first line\n" and ran(notes) == []
        denied = json.loads(
            next(m for m in llm.last_messages() if m["role"] == "tool")["content"].partition("\n")[2]
        )
        assert denied["kind"] == "denied"
        (edit,) = edits_of(fake, interaction)
        assert f"denied by <@{ada.id}>" in json.dumps(edit.body()["embeds"])
        assert edit.body()["components"] == []


def two_appends() -> Reply:
    return tool_reply(
        FakeCall(name="append_note", arguments='{"text": "one"}', id="c1"),
        FakeCall(name="append_note", arguments='{"text": "two"}', id="c2"),
        content="Adding both lines.",
    )


async def test_approve_all_runs_every_waiting_call_of_the_batch(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    async with (
        FakeLLMServer([two_appends(), reply("Added both.")]) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add one and two", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)
        assert len(approval["embeds"]) == 2, "one message for the batch, one embed per call"
        assert {"Approve 1. append_note", "Deny 1", "Approve 2. append_note", "Deny 2"} <= set(
            buttons(approval)
        )
        assert {"Approve all", "Deny all", "Always allow here"} <= set(buttons(approval))

        await click(fake, ada, approval, "Approve all")
        answers = await posted_in(fake, int(mention["id"]))
        assert answers[0].body()["content"].startswith("Added both.")
        # Both ran, once each; the calls of one batch run at once, so in either order.
        first, *added = note(notes).splitlines()
        assert first == "first line" and sorted(added) == ["one", "two"]


async def test_one_call_approved_then_deny_all_denies_the_rest_and_the_message_shows_each_outcome(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    async with (
        FakeLLMServer([two_appends(), reply("Added one; two was denied.")]) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add one and two", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)

        first = await click(fake, ada, approval, "Approve 1. append_note")
        (edit,) = await fake.wait_for("PATCH", re.escape(f"/webhooks/{fake.app_id}/{first['token']}") + ".*")
        assert set(buttons(edit.body())) == {
            "Approve 2. append_note",
            "Deny 2",
            "Approve all",
            "Deny all",
            "Always allow here",
        }, "the decided call loses its buttons; the others keep theirs"
        assert ran(notes) == [], "nothing runs until every call is decided"

        second = await click(fake, ada, fake.messages[int(approval["id"])], "Deny all")
        answers = await posted_in(fake, int(mention["id"]))
        assert "two was denied" in answers[0].body()["content"]
        assert note(notes) == "first line\none\n"
        (final,) = edits_of(fake, second)
        outcomes = [f["value"] for e in final.body()["embeds"] for f in e["fields"] if f["name"] == "Outcome"]
        assert outcomes == [f"✅ approved by <@{ada.id}>", f"❌ denied by <@{ada.id}>"]
        assert final.body()["components"] == []


async def test_always_allow_here_approves_and_the_next_call_in_that_channel_runs_without_asking(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    script = [
        tool_reply(FakeCall(name="append_note", arguments='{"text": "one"}', id="c1")),
        reply("Added one."),
        tool_reply(FakeCall(name="append_note", arguments='{"text": "two"}', id="c2")),
        reply("Added two."),
    ]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        first = await fake.user_says(ada, "add one", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)
        await click(fake, ada, approval, "Always allow here")
        await posted_in(fake, int(first["id"]))
        remembered = await store.remembered_approvals()
        assert [(r.place, r.server, r.tool, r.granted_by) for r in remembered] == [
            (f"discord:{fake.channel_id}", "notes", "append_note", str(ada.id))
        ]

        second = await fake.user_says(ada, "add two", mention_bot=True)
        await posted_in(fake, fake.channel_id, count=2)

        def replies_to_second() -> list[dict[str, Any]]:
            return [
                m
                for m in fake.bot_messages(fake.channel_id)
                if int((m.get("message_reference") or {}).get("message_id") or 0) == int(second["id"])
            ]

        # The reply is shown as it is written (a tool line first); its final text needs no approval.
        await fake.wait_until(lambda: any(m["content"].startswith("Added two.") for m in replies_to_second()))
        assert len(replies_to_second()) == 1, "no approval asked this time"
        assert note(notes) == "first line\none\ntwo\n"
        llm.assert_complete()


# --- restarts, expiry, waiting messages ----------------------------------------------------------------


async def test_a_request_decided_before_a_stop_is_resumed_at_start_up_and_its_message_updated(
    fake: FakeDiscord, host: MCPHost, notes: Path, tmp_path: Path
) -> None:
    database = tmp_path / "recover.db"
    ada = fake.user("ada")
    async with FakeLLMServer([read_and_append(), reply("Recovered and added.")]) as llm:
        store = await SQLiteStore.open(database)
        inbox = WatchedInbox(store)
        try:
            async with approving_agent(llm, store, host, inbox=inbox) as agent:
                async with running_bot(fake, agent):
                    mention = await fake.user_says(ada, "add hi", mention_bot=True)
                    approval = await approval_in(fake, fake.channel_id)
                    async with asyncio.timeout(10):
                        await inbox.finished.wait()
                # The click was decided, then the process stopped before it resumed the turn.
                request_id = buttons(approval)["Approve"].split(":")[3]
                assert (await decide(agent, request_id, str(ada.id), approve=True)).ready

                async with running_bot(fake, agent):
                    answers = await posted_in(fake, int(mention["id"]))
                    assert answers[0].body()["content"].startswith("Recovered and added.")
                    # The last edit of the approval message (the first may have made the live answer it).
                    redraw = fake.find("PATCH", rf"/channels/{fake.channel_id}/messages/{approval['id']}")[-1]
                    assert redraw.body()["components"] == []
                    assert f"approved by <@{ada.id}>" in json.dumps(redraw.body()["embeds"])
            assert note(notes) == "first line\nhi\n"
        finally:
            await store.close()


async def test_the_expiry_sweeper_goes_on_without_a_click_and_is_cancelled_at_close(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NerveDiscordBot, "approval_sweep_every", 0.05)
    clock = Clock(time.time())
    script = [read_and_append(), reply("It expired; nothing was added.")]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host, clock=clock) as agent,
    ):
        async with running_bot(fake, agent) as bot:
            ada = fake.user("ada")
            mention = await fake.user_says(ada, "add hi", mention_bot=True)
            approval = await approval_in(fake, fake.channel_id)
            clock.now += 601
            answers = await posted_in(fake, int(mention["id"]))
            assert "expired" in answers[0].body()["content"]
            await fake.wait_for("PATCH", rf"/channels/{fake.channel_id}/messages/{approval['id']}")
            sweeper = next(t for t in bot._tasks if t.get_name() == "discord-approval-expiry")
        assert sweeper.cancelled(), "the sweeper is owned by the client and ends with it"
        assert ran(notes) == ["read_note"]


async def test_a_message_in_the_thread_while_its_turn_waits_gets_a_notice_and_is_answered_after(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    script = [read_and_append(), reply("Added hi."), reply("The note now has two lines.")]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add hi", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)
        await fake.wait_for("POST", THREADS)
        thread = int(mention["id"])

        waiting = await fake.user_says(
            ada, "and how many lines are there?", channel_id=thread, mention_bot=True
        )
        (notice,) = await posted_in(fake, thread)
        assert "waiting for a decision" in notice.body()["content"]
        assert len(llm.requests) == 1, "the waiting message did not start a turn"

        await click(fake, ada, approval, "Approve")
        answers = await posted_in(fake, thread, count=3)
        assert answers[1].body()["content"].startswith("Added hi.")
        assert answers[2].body()["content"] == "The note now has two lines."
        assert int(answers[2].body()["message_reference"]["message_id"]) == int(waiting["id"])
        assert "and how many lines are there?" in json.dumps(llm.last_messages())
        llm.assert_complete()


# --- /ask ----------------------------------------------------------------------------------------------


async def test_an_ask_that_waits_turns_its_deferred_answer_into_the_approval_message(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    async with (
        FakeLLMServer([read_and_append(), reply("Added it for you.")]) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        interaction = await fake.slash(
            ada, "ask", {"question": "add hi to the note"}, channel_id=fake.channel_id
        )
        (defer,) = await fake.wait_for("POST", CALLBACK)
        assert defer.json["type"] == 5
        await fake.wait_for("POST", THREADS)
        answer_id = fake._interactions[interaction["token"]]["original"]
        approval = fake.messages[answer_id]
        assert is_approval(approval) and set(buttons(approval)) == {"Approve", "Deny", "Always allow here"}
        assert len([m for m in fake.bot_messages() if is_approval(m)]) == 1, "one approval message"

        await click(fake, ada, approval, "Approve")
        answers = await posted_in(fake, answer_id)
        assert answers[0].body()["content"].startswith("Added it for you.")
        assert note(notes) == "first line\nhi\n"


# --- /approvals and /tools -----------------------------------------------------------------------------


async def test_approvals_lists_and_revokes_for_an_admin_and_refuses_anyone_else(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, admin: FakeUser
) -> None:
    place = f"discord:{fake.channel_id}"
    await store.remember(place, "notes", "append_note", "d" * 64, "12345")
    async with (
        FakeLLMServer([]) as llm,
        approving_agent(llm, store, host, admins=(admin,)) as agent,
        running_bot(fake, agent, **bot_settings(admin)),
    ):
        eve = fake.user("eve")
        refused = await fake.slash(eve, "approvals", channel_id=fake.channel_id)
        (callback,) = await fake.wait_for("POST", re.escape(f"/interactions/{refused['id']}/") + ".*")
        assert callback.body()["type"] == 4 and callback.body()["data"]["flags"] & 64
        assert "Only nerve's admins" in callback.body()["data"]["content"]

        listed = await fake.slash(admin, "approvals", channel_id=fake.channel_id)
        (listing,) = await fake.wait_for("POST", rf"/webhooks/\d+/{re.escape(listed['token'])}")
        assert listing.body()["flags"] & 64
        assert f"`{place} notes/append_note`" in listing.body()["content"]
        assert "<@12345>" in listing.body()["content"]

        choices = await fake.autocomplete(admin, "approvals", "revoke", "append", channel_id=fake.channel_id)
        (offered,) = await fake.wait_for("POST", re.escape(f"/interactions/{choices['id']}/") + ".*")
        assert offered.body()["data"]["choices"] == [
            {"name": f"{place} notes/append_note", "value": f"{place} notes/append_note"}
        ]

        revoked = await fake.slash(
            admin, "approvals", {"revoke": f"{place} notes/append_note"}, channel_id=fake.channel_id
        )
        (done,) = await fake.wait_for("POST", rf"/webhooks/\d+/{re.escape(revoked['token'])}")
        assert "Revoked" in done.body()["content"] and done.body()["flags"] & 64
        assert await store.remembered_approvals() == []

        not_admin = await fake.slash(
            eve, "approvals", {"revoke": f"{place} notes/append_note"}, channel_id=fake.channel_id
        )
        (refusal,) = await fake.wait_for("POST", re.escape(f"/interactions/{not_admin['id']}/") + ".*")
        assert "Only nerve's admins" in refusal.body()["data"]["content"]


@contextlib.asynccontextmanager
async def every_server_up(servers: dict[str, ServerConfig]) -> AsyncIterator[MCPHost]:
    """A host whose servers have each made their first attempt, however slow the machine is: the
    listing below is of every server's tools, not of the ones that happened to be ready first."""
    host = MCPHost(servers, default_timeout=10.0)
    await host.start(grace=60.0, limit=60.0)
    try:
        yield host
    finally:
        await host.aclose()


async def test_tools_in_a_guild_whose_policy_hides_a_server_lists_only_what_is_offered_there(
    fake: FakeDiscord, store: SQLiteStore, notes: Path
) -> None:
    scopes = Scopes(rules={f"discord:guild:{fake.guild_id}": Rule(deny=("notes",))})
    servers = {"notes": trust_server(notes), "env-query": stdio_server("servers.env_query")}
    async with (
        every_server_up(servers) as host,
        FakeLLMServer([]) as llm,
        approving_agent(llm, store, host, scopes=scopes) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        in_guild = await fake.slash(ada, "tools", channel_id=fake.channel_id)
        in_dm = await fake.slash(ada, "tools")
        texts = {}
        for sent in (in_guild, in_dm):
            (callback,) = await fake.wait_for("POST", re.escape(f"/interactions/{sent['id']}/") + ".*")
            texts[sent["id"]] = callback.body()["data"]["content"]
        assert "get_environment_status" in texts[in_guild["id"]]
        assert "read_note" not in texts[in_guild["id"]] and "append_note" not in texts[in_guild["id"]]
        assert "read_note" in texts[in_dm["id"]], "the guild's rule does not reach DMs"


async def test_every_discord_turn_carries_its_place(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    """Guild and channel for a mention, the parent channel for a thread, the DM for a DM."""
    scopes = Scopes(
        rules={
            f"discord:{fake.channel_id}": Rule(allow=("notes/read_note",)),
            f"discord:guild:{fake.guild_id}": Rule(deny=("notes",)),
            "discord:dm": Rule(deny=("notes",)),
        }
    )
    script = [reply("channel"), reply("thread"), reply("dm")]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host, scopes=scopes) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "hello", mention_bot=True)
        await fake.wait_for("POST", THREADS)
        await fake.user_says(ada, "in the thread", channel_id=int(mention["id"]), mention_bot=True)
        await posted_in(fake, int(mention["id"]))
        await fake.user_dms(ada, "in a DM")
        await posted_in(fake, fake.dm_channels[ada.id])
        offered = [sorted(t["function"]["name"] for t in r.get("tools") or []) for r in llm.requests]
        assert offered == [["read_note"], ["read_note"], []]


async def test_a_turn_that_waits_in_a_thread_shows_its_approval_there_and_always_allow_covers_the_channel(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    script = [
        reply("Hello!"),
        tool_reply(FakeCall(name="append_note", arguments='{"text": "x"}', id="c1")),
        reply("Added x."),
    ]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "hi", mention_bot=True)
        await fake.wait_for("POST", THREADS)
        thread = int(mention["id"])
        await fake.user_says(ada, "add x", channel_id=thread, mention_bot=True)
        approval = await approval_in(fake, thread)
        request_id = buttons(approval)["Approve"].split(":")[3]
        found = await store.prompt(request_id)
        assert found is not None and found[0].place == f"discord:{fake.channel_id}", "the thread's channel"

        await click(fake, ada, approval, "Always allow here")
        answers = await posted_in(fake, thread, count=2)
        assert answers[-1].body()["content"].startswith("Added x.")
        (remembered,) = await store.remembered_approvals()
        assert remembered.place == f"discord:{fake.channel_id}"
        assert note(notes) == "first line\nx\n"


async def test_a_mention_shown_live_that_waits_turns_its_live_message_into_the_one_approval_message(
    fake: FakeDiscord, store: SQLiteStore, host: MCPHost, notes: Path
) -> None:
    reason = "I'll read the note and add your line, one step at a time."
    calls = (
        FakeCall(name="read_note", arguments="{}", id="c_read"),
        FakeCall(name="append_note", arguments=json.dumps({"text": "hi"}), id="c_add"),
    )
    # Held after a few words of the reason, so the live message is surely there before the turn waits.
    script = [Reply(content=reason, tool_calls=calls, chunk_chars=8, stall_after=3, stall=15)]
    async with (
        FakeLLMServer(script) as llm,
        approving_agent(llm, store, host) as agent,
        running_bot(fake, agent),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add hi to the note", mention_bot=True)
        (live,) = await posted_in(fake, fake.channel_id)
        assert reason.startswith(live.body()["content"])
        llm.unstall()
        approval = await approval_in(fake, fake.channel_id)
        await fake.wait_for("POST", THREADS)

        assert len(fake.find("POST", rf"/channels/{fake.channel_id}/messages")) == 1, "one message"
        assert int(approval["id"]) == min(int(m["id"]) for m in fake.bot_messages(fake.channel_id))
        assert int(approval["message_reference"]["message_id"]) == int(mention["id"])
        assert "Waiting for approval" in approval["content"] and reason in approval["content"]
        assert set(buttons(approval)) == {"Approve", "Deny", "Always allow here"}
        request_id = buttons(approval)["Approve"].split(":")[3]
        found = await store.prompt(request_id)
        assert found is not None and found[0].message_ref == f"{fake.channel_id}:{approval['id']}"
        assert ran(notes) == ["read_note"]

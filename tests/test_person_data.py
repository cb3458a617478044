"""A person's data rights: forget everything stored about them, or export it, on both stores.

Alice and Bob share a Slack channel thread; Alice also talks to nerve in a DM, is signed in to a
server, decided on a tool call, has a delivery not answered yet, a message deferred behind a parked
turn, a parked turn of her own, a tool's question, a vote and memories. Everything Alice wrote
carries a canary only she knows (lowercase, so the memories' full-text index, which keeps words
lowercased, would show one too). After forgetting Alice, no byte of the database holds one of her
canaries (on SQLite: the file and its write-ahead log, read as bytes), every one of Bob's is still
there, and the shared thread still answers Bob.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx2
import pytest

from adapters.common.rights import NOTHING_STORED, forgotten_lines
from adapters.discord.platform import DISCORD
from adapters.slack.platform import SLACK
from adapters.terminal.platform import TERMINAL
from bot.agent import Agent, AgentConfig, Forgotten
from bot.mcp.auth.vault import Vault
from bot.mcp.host import MCPHost
from bot.store.base import ConversationStore
from bot.store.feedback import Feedback
from bot.store.locks import KeyedLocks
from bot.store.person_data import ANSWER_DELETED, FORGOTTEN_WRITER, MESSAGE_DELETED
from bot.types import (
    AuditEntry,
    ChatMessage,
    ConversationKey,
    Incoming,
    InputRequest,
    PendingCall,
    Person,
    Place,
    Platforms,
)
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.stores import Backend
from tests.test_cli import ROOT, WARM_NERVE
from tests.test_sign_in import KEY as SIGN_IN_KEY
from tests.test_sign_in import SECRET, Shown, ask, notes, open_agent, sign_in_and_resume

pytestmark = pytest.mark.both_stores
# The sign-in tests' notes server (a fixture), for the sign-ins forgetting revokes.
__all__ = ["notes"]

PLATFORMS = Platforms((SLACK, DISCORD, TERMINAL))
ALICE, BOB = "UALICE", "UBOB"
ALICE_ID, BOB_ID = f"slack:T1:{ALICE}", f"slack:T1:{BOB}"
DM = ConversationKey(platform="slack", workspace="T1", channel="DALICE", thread="dm")
SHARED = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="100.1")
PARKED_THREAD = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="200.1")


def alice(n: int) -> str:
    return f"canaryalice{n}x"


def bob(n: int) -> str:
    return f"canarybob{n}x"


def said(key: ConversationKey, user: str, text: str, event: str | None = None) -> Incoming:
    dm = key.channel.startswith("D")
    place = Place(platform="slack", channel=key.channel, dm=dm, user=user)
    return Incoming(key=key, text=text, user_id=user, event_id=event, place=place)


def agent(llm: ScriptedLLM, host: MCPHost, store: ConversationStore) -> Agent:
    config = AgentConfig(platforms=PLATFORMS)
    return Agent(llm=llm, host=host, store=store, inbox=store, config=config, approvals=store)


async def alice_and_bob(store: ConversationStore, backend: Backend, host: MCPHost) -> None:
    """The scene of the module's docstring."""
    llm = ScriptedLLM(
        [
            Step(text=f"Noted: {alice(1)}"),
            Step(text=f"Still noted: {alice(2)}"),
            Step(text=f"Bob asked {bob(1)}"),
            Step(calls=[Call("wait_and_echo", {"label": alice(3)})]),
            Step(text=f"The tool echoed {alice(3)}"),
            Step(text=f"Bob again {bob(2)}"),
        ]
    )
    nerve = agent(llm, host, store)
    await nerve.reply(said(DM, ALICE, f"remember {alice(1)}", "e1"))
    await nerve.reply(said(DM, ALICE, f"and {alice(2)}", "e2"))
    await nerve.reply(said(SHARED, BOB, f"bob asks {bob(1)}", "e3"))
    await nerve.reply(said(SHARED, ALICE, f"alice asks {alice(3)}", "e4"))
    await nerve.reply(said(SHARED, BOB, f"bob again {bob(2)}", "e5"))
    llm.assert_complete()

    for person, secret in ((ALICE_ID, alice(4)), (BOB_ID, bob(3))):
        await store.save_tokens(
            server="notes", person=person, issuer="", secret=secret.encode(), scope=None, now=1.0
        )
    await store.start_sign_in(
        state="state-a",
        server="files",
        person=ALICE_ID,
        key=DM,
        secret=alice(5).encode(),
        expires_at=9e9,
        now=1.0,
    )
    for who in (ALICE, BOB):
        entry = AuditEntry(
            who=who,
            place="slack:C1",
            server="loop",
            tool="wait_and_echo",
            call_id=f"c-{who}",
            arguments_hash="h",
            outcome="approved",
        )
        await store.record_audit(SHARED, [entry])
    await store.claim_event(
        "slack", "Ev-alice", json.dumps({"team_id": "T1", "event": {"user": ALICE, "text": alice(6)}})
    )
    await store.claim_event(
        "slack",
        "Ev-bob",
        json.dumps({"team_id": "T1", "event": {"user": BOB, "text": f"<@{ALICE}> {bob(4)}"}}),
    )
    await store.park(
        request_id="parked-a",
        incoming=said(PARKED_THREAD, ALICE, f"please {alice(7)}"),
        answer=ChatMessage(role="assistant", content=f"about {alice(7)}"),
        done=[],
        calls=[
            (
                PendingCall(
                    call_id="p1",
                    server="loop",
                    tool="wait_and_echo",
                    arguments={"label": alice(7)},
                    call_hash="ch",
                ),
                "dh",
            )
        ],
        rounds_used=1,
        expires_at=9e9,
    )
    await store.defer(said(PARKED_THREAD, ALICE, f"later {alice(8)}"))
    await store.defer(said(PARKED_THREAD, BOB, f"later {bob(5)}"))
    await store.open_input(
        InputRequest(
            request_id="q-a",
            key=SHARED,
            user_id=ALICE,
            server="loop",
            tools=("t",),
            message=f"which {alice(9)}?",
            mode="form",
        ),
        None,
        1.0,
    )
    await store.record_feedback(Feedback(key=SHARED, message_ts="1.1", user_id=ALICE, rating="up"))
    await store.record_feedback(Feedback(key=SHARED, message_ts="1.1", user_id=BOB, rating="down"))
    memories = [
        ("person", ALICE_ID, f"alice likes {alice(10)}", ALICE_ID),
        ("place", "slack:C1", "the standup is at ten", ALICE_ID),
        ("person", BOB_ID, f"bob likes {bob(6)}", BOB_ID),
        ("person", ALICE_ID, f"bob says alice likes {alice(11)}", BOB_ID),
    ]
    for kind, subject, text, writer in memories:
        await store.add_memory(
            kind=kind, subject=subject, text=text, anywhere=False, written_by=writer, written_in="slack:C1"
        )


async def stored_text(backend: Backend) -> bytes:
    return b"\n".join(await backend.everything_stored())


async def test_messages_are_stored_with_their_author_and_privacy(store, store_backend, loop_host):
    await alice_and_bob(store, store_backend, loop_host)
    rows = await store_backend.rows(
        "SELECT c.channel, c.private, m.role, m.author, m.author_user FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id WHERE m.role = 'user' ORDER BY m.id"
    )
    assert rows == [
        ("DALICE", 1, "user", ALICE_ID, ALICE),
        ("DALICE", 1, "user", ALICE_ID, ALICE),
        ("C1", 0, "user", BOB_ID, BOB),
        ("C1", 0, "user", ALICE_ID, ALICE),
        ("C1", 0, "user", BOB_ID, BOB),
    ]
    answers = await store_backend.rows("SELECT author FROM messages WHERE role <> 'user'")
    assert answers and all(row == (None,) for row in answers), "only a person's own message has an author"


async def test_the_terminal_is_private_as_a_platform_without_channels(store, store_backend, loop_host):
    key = ConversationKey(platform="terminal", workspace="ann", channel="cli", thread="default")
    place = Place(platform="terminal", channel="cli", user="ann")
    nerve = agent(ScriptedLLM([Step(text="hello")]), loop_host, store)
    await nerve.reply(Incoming(key=key, text="hi", user_id="ann", place=place))
    rows = await store_backend.rows(
        "SELECT c.private, m.author FROM messages m JOIN conversations c ON c.id = m.conversation_id"
        " WHERE m.role = 'user'"
    )
    assert rows == [(1, "terminal:ann:ann")]
    assert (await nerve.forget_person(key, "ann")).conversations == 1


async def test_forget_removes_exactly_the_persons_data(store, store_backend, loop_host):
    await alice_and_bob(store, store_backend, loop_host)
    before = await stored_text(store_backend)
    assert all(alice(n).encode() in before for n in (1, 2, 3, 6, 7, 8, 9, 10, 11)), "the scene holds them"

    found = await agent(ScriptedLLM([]), loop_host, store).forget_person(SHARED, ALICE)

    assert found == Forgotten(
        memories=2,
        place_memories=1,
        conversations=1,
        messages=1,
        answers=3,
        sign_ins=2,
        waiting=3,
        inbox=1,
        feedback=1,
    )
    after = await stored_text(store_backend)
    left = [n for n in range(1, 12) if alice(n).encode() in after]
    assert left == [], f"Alice's canaries {left} are still stored"
    assert all(bob(n).encode() in after for n in range(1, 7)), "everything of Bob's stays"

    # The shared thread reads on: Bob's messages and answers as they were, Alice's turn a note.
    history = await store.history(SHARED)
    assert [(m.role, m.content) for m in history] == [
        ("user", f"bob asks {bob(1)}"),
        ("assistant", f"Bob asked {bob(1)}"),
        ("user", MESSAGE_DELETED),
        ("assistant", None),
        ("tool", ANSWER_DELETED),
        ("assistant", ANSWER_DELETED),
        ("user", f"bob again {bob(2)}"),
        ("assistant", f"Bob again {bob(2)}"),
    ]
    call = history[3].tool_calls[0]
    assert (call.name, call.arguments) == ("wait_and_echo", "{}") and history[4].tool_call_id == call.id
    assert await store.history(DM) == []

    # Who decided which call stays, without text; the place memory stays, without its writer.
    audit = await store_backend.rows("SELECT who FROM audit WHERE who <> 'nerve' ORDER BY id")
    assert audit == [(ALICE,), (BOB,)]
    kept = await store_backend.rows("SELECT subject, written_by FROM memories ORDER BY subject")
    assert kept == [("slack:C1", FORGOTTEN_WRITER), (BOB_ID, BOB_ID)]
    assert await store.stored_tokens("notes", BOB_ID) is not None
    assert await store.stored_tokens("notes", ALICE_ID) is None
    assert await store.unfinished_payload("slack", "Ev-alice") == "{}"
    assert bob(4) in (await store.unfinished_payload("slack", "Ev-bob") or "")

    # Forgetting again finds nothing; so does a person never seen.
    again = await agent(ScriptedLLM([]), loop_host, store).forget_person(SHARED, ALICE)
    assert again.total == 0 and forgotten_lines(again) == [NOTHING_STORED]


class WatchedLocks:
    """The in-memory turn locks, telling the test when someone asks for `watched`."""

    def __init__(self, watched: ConversationKey) -> None:
        self.locks: KeyedLocks[ConversationKey] = KeyedLocks()
        self.watched = watched
        self.asked = asyncio.Event()

    def hold(self, key: ConversationKey) -> AbstractAsyncContextManager[None]:
        if key == self.watched:
            self.asked.set()
        return self.locks.hold(key)


async def test_forgetting_waits_for_the_turn_running_in_their_conversation(store, store_backend, loop_host):
    await alice_and_bob(store, store_backend, loop_host)
    locks = WatchedLocks(DM)
    nerve = Agent(
        llm=ScriptedLLM([]),
        host=loop_host,
        store=store,
        inbox=store,
        config=AgentConfig(platforms=PLATFORMS),
        turn_lock=locks,
    )
    async with locks.locks.hold(DM):  # a turn of Alice's DM runs
        forgetting = asyncio.create_task(nerve.forget_person(DM, ALICE))
        await asyncio.wait_for(locks.asked.wait(), 30)
        # The turn's answer lands while forgetting waits for it.
        await store.append(DM, [ChatMessage(role="assistant", content=f"late {alice(12)}")])
    found = await asyncio.wait_for(forgetting, 30)
    assert found.conversations == 1
    assert await store.history(DM) == []
    assert b"canaryalice" not in await stored_text(store_backend)


async def test_the_shared_thread_still_answers_after_forgetting(store, store_backend, loop_host):
    await alice_and_bob(store, store_backend, loop_host)
    await agent(ScriptedLLM([]), loop_host, store).forget_person(SHARED, ALICE)
    llm = ScriptedLLM([Step(text="Here you go, Bob")])
    reply = await agent(llm, loop_host, store).reply(said(SHARED, BOB, "and now?", "e6"))
    assert reply.text == "Here you go, Bob" and not reply.failed
    sent = "\n".join(f"{m.content} {[c.arguments for c in m.tool_calls]}" for m in llm.last_request())
    assert "canaryalice" not in sent and MESSAGE_DELETED in sent and bob(1) in sent


async def test_export_holds_the_persons_data_and_nobody_elses(store, store_backend, loop_host):
    await alice_and_bob(store, store_backend, loop_host)
    nerve = agent(ScriptedLLM([]), loop_host, store)

    document = await nerve.export_person(DM, ALICE)

    text = json.dumps(document)
    assert all(alice(n) in text for n in (1, 2, 3, 8, 9, 10, 11)), text
    assert "canarybob" not in text, "nothing of Bob's is in Alice's export"
    assert alice(4) not in text and alice(5) not in text, "sign-ins are named, never their tokens"
    assert document["person"]["id"] == ALICE_ID
    assert [c["channel"] for c in document["private_conversations"]] == ["DALICE"]
    assert [m["text"] for m in document["messages"]] == [f"alice asks {alice(3)}"]
    assert [(a["tool"], a["outcome"]) for a in document["approvals"]] == [("wait_and_echo", "approved")]
    assert [s["server"] for s in document["sign_ins"]] == ["notes"]
    assert sorted(m["text"] for m in document["memories"]) == [
        f"alice likes {alice(10)}",
        f"bob says alice likes {alice(11)}",
        "the standup is at ten",
    ]
    assert [v["rating"] for v in document["feedback"]] == ["up"]

    await nerve.forget_person(DM, ALICE)
    empty = await nerve.export_person(DM, ALICE)
    assert "canaryalice" not in json.dumps(empty)
    assert empty["private_conversations"] == empty["messages"] == empty["memories"] == []


def test_a_person_is_named_by_platform_workspace_and_user_or_by_a_global_id():
    assert Person.named("slack:T1:U1", PLATFORMS).id == "slack:T1:U1"
    assert Person.named("discord:42", PLATFORMS) == Person(
        id="discord:42", platform="discord", user_id="42", workspace=None
    )
    assert Person.named("terminal:ann:ann", PLATFORMS).id == "terminal:ann:ann"
    for wrong, says in (
        ("slack:U1", "slack:WORKSPACE_ID:USER_ID"),
        ("discord:G1:42", "discord:USER_ID"),
        ("matrix:U1", "no known platform"),
        ("slack::U1", "slack:WORKSPACE_ID:USER_ID"),
    ):
        with pytest.raises(ValueError, match=says):
            Person.named(wrong, PLATFORMS)


async def nerve(
    backend: Backend, tmp_path: Path, *args: str, servers: dict[str, object] | None = None, **extra: str
) -> tuple[int, str, str]:
    """`python -m bot ARGS` (started warm) on this test's database, its stdin not a terminal."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_"))}
    env["NERVE_MCP_CONFIG"] = str(tmp_path / "servers.json")
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": servers or {}}))
    env.update(extra)
    for name, value in backend.settings().items():
        env[name.upper()] = str(value)
    process = await asyncio.create_subprocess_exec(
        *WARM_NERVE,
        *args,
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    return process.returncode or 0, out.decode(), err.decode()


async def test_the_command_line_exports_and_forgets_a_person(store, store_backend, loop_host, tmp_path):
    await alice_and_bob(store, store_backend, loop_host)
    await store.close()  # as an operator would: nerve's own process holds nothing open meanwhile

    code, out, err = await nerve(store_backend, tmp_path, "export", "--user", ALICE_ID)
    assert code == 0, err
    assert alice(1) in out and "canarybob" not in out and json.loads(out)["person"]["id"] == ALICE_ID
    target = tmp_path / "alice.json"
    code, out, err = await nerve(
        store_backend, tmp_path, "export", "--user", ALICE_ID, "--output", str(target)
    )
    assert code == 0 and out == "" and str(target) in err
    assert json.loads(target.read_text())["person"]["id"] == ALICE_ID
    assert target.stat().st_mode & 0o077 == 0, "an export is readable by its owner only"

    code, out, err = await nerve(store_backend, tmp_path, "forget", "--user", ALICE_ID)
    assert code == 2 and "add --yes" in err, "never forgets by surprise off a terminal"
    assert alice(1).encode() in await stored_text(store_backend)

    code, out, err = await nerve(store_backend, tmp_path, "forget", "--user", ALICE_ID, "--yes")
    assert code == 0, err
    assert "1 private conversation deleted" in out and "1 message in shared threads replaced by a note" in out
    assert "2 memories about you deleted" in out
    assert b"canaryalice" not in await stored_text(store_backend)

    code, out, err = await nerve(store_backend, tmp_path, "forget", "--user", "slack:T1:UNOBODY", "--yes")
    assert code == 0 and NOTHING_STORED in out

    code, out, err = await nerve(store_backend, tmp_path, "forget", "--user", "slack:UALICE", "--yes")
    assert code == 2 and "slack:WORKSPACE_ID:USER_ID" in err and "Traceback" not in err


async def test_forgetting_revokes_their_sign_ins_at_the_server(notes, store, store_backend):
    llm = ScriptedLLM([Step(calls=[Call("connect_notes", {}, id="c1")]), Step(text="connected")])
    nerve, host = await open_agent(notes, store, llm)
    try:
        shown = Shown()
        await nerve.reply(ask("U1"), shown)
        await sign_in_and_resume(nerve, shown, "alice")
        stored = await store.stored_tokens("notes", "slack:T1:U1")
        assert stored is not None
        access = Vault(SECRET).open(stored.secret)["token"]["access_token"]

        found = await nerve.forget_person(SIGN_IN_KEY, "U1")

        assert found.sign_ins == 1 and await store.stored_tokens("notes", "slack:T1:U1") is None
        async with httpx2.AsyncClient() as http:
            probe = await http.post(notes.mcp_url, json={}, headers={"Authorization": f"Bearer {access}"})
        assert probe.status_code == 401, "the token was revoked at the server, not only forgotten here"
    finally:
        await host.aclose()


async def test_the_command_line_revokes_their_sign_ins_at_the_server_too(
    notes, store, store_backend, tmp_path
):
    llm = ScriptedLLM([Step(calls=[Call("connect_notes", {}, id="c1")]), Step(text="connected")])
    nerve_here, host = await open_agent(notes, store, llm)
    try:
        shown = Shown()
        await nerve_here.reply(ask("U1"), shown)
        await sign_in_and_resume(nerve_here, shown, "alice")
    finally:
        await host.aclose()
    stored = await store.stored_tokens("notes", "slack:T1:U1")
    assert stored is not None
    access = Vault(SECRET).open(stored.secret)["token"]["access_token"]
    await store.close()

    # The running nerve's settings: its servers file, its key, where sign-ins come back to.
    entry = {"url": notes.mcp_url, "allowPrivateNetwork": True, "auth": {"type": "oauth", "identity": "user"}}
    code, out, err = await nerve(
        store_backend,
        tmp_path,
        "forget",
        "--user",
        "slack:T1:U1",
        "--yes",
        servers={"notes": entry},
        NERVE_SECRET_KEY=SECRET,
        NERVE_PUBLIC_URL="https://nerve.example",
    )

    assert code == 0, err
    assert "1 sign-in to a server ended" in out and "not revoked" not in err
    async with httpx2.AsyncClient() as http:
        probe = await http.post(notes.mcp_url, json={}, headers={"Authorization": f"Bearer {access}"})
    assert probe.status_code == 401, "the token was revoked at the server"

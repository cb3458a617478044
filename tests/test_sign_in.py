"""Per-person sign-in, end to end in the core: a turn that needs a person's own account parks, the
person signs in in their browser, the callback finishes it (in any process), the turn goes on with
their identity — and nobody else's token is ever used for them.

Real Agent, real SQLite store, the real OAuth-protected notes server (its own authorization server)
as a subprocess on loopback, the SDK's OAuth client underneath, a scripted model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx2
import pytest

from adapters.settings import PLATFORMS
from bot.agent import Agent, AgentConfig
from bot.asks.connections import Connections
from bot.files.tools import FILES_SERVER
from bot.mcp.auth.people import person_of
from bot.mcp.auth.sign_ins import SignIns
from bot.mcp.auth.vault import Vault
from bot.mcp.host import MCPHost
from bot.mcp.server_config import AuthConfig, ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Incoming, Platforms, SignInFinished, SignInNeeded
from servers.notes_oauth.sign_in import sign_in_as
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.test_notes_oauth_server import RunningServer, start_server, stop_server
from tests.test_parked_questions import Shown as QuestionsShown

# The store-level behaviour of these turns holds on SQLite and on PostgreSQL alike.
pytestmark = pytest.mark.both_stores

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="700.1")
CALLBACK = "https://nerve.example/oauth/callback"
SECRET = "a-test-secret-key-long-enough"


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[RunningServer]:
    server = await start_server(tmp_path, "--port", "0", "--allow-redirect-uri", CALLBACK)
    try:
        yield server
    finally:
        await stop_server(server)


def notes_entry(server: RunningServer) -> dict[str, ServerConfig]:
    return {
        "notes": ServerConfig(
            url=server.mcp_url,
            allow_private_network=True,
            auth=AuthConfig(type="oauth", identity="user"),
            approval="never",
        )
    }


class Shown(QuestionsShown):
    """The front end's view, with the sign-ins it was asked to show."""

    def sign_ins(self) -> list[SignInNeeded]:
        return [
            e.ask.sign_in
            for e in self.events
            if e.kind == "ask" and e.ask is not None and e.ask.sign_in is not None
        ]


async def open_agent(
    server: RunningServer, store: SQLiteStore, llm: ScriptedLLM, secret: str = SECRET
) -> tuple[Agent, MCPHost]:
    servers = notes_entry(server)
    sign_ins = SignIns(servers, store, Vault(secret), redirect_uri=CALLBACK)
    host = MCPHost(servers, sign_ins=sign_ins)
    await host.start()
    agent = Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=store,
        approvals=store,
        inputs=store,
        config=AgentConfig(approval_timeout=60, sign_in_timeout=60),
        connections=Connections(sign_ins, host, PLATFORMS),
    )
    return agent, host


def ask(user: str, text: str = "who am I at notes?", event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id=user, event_id=event_id)


async def browser_signs_in(sign_in: SignInNeeded, user: str) -> dict[str, str]:
    """The person follows their link and signs in; what their browser brings back to nerve."""
    location = await sign_in_as(sign_in.url, user)
    assert location.startswith(CALLBACK), location
    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}


def tool_results(llm: ScriptedLLM) -> dict[str, str]:
    return {
        m.tool_call_id or "": m.content or "" for request in llm.requests for m in request if m.role == "tool"
    }


async def sign_in_and_resume(agent: Agent, shown: Shown, user: str) -> str:
    [needed] = shown.sign_ins()
    came_back = await browser_signs_in(needed, user)
    finished = SignInFinished(
        code=came_back.get("code"), iss=came_back.get("iss"), error=came_back.get("error")
    )
    answered = await agent.answer(came_back["state"], user, finished)
    [request_id] = answered.resume
    reply = await agent.resume(request_id)
    assert reply is not None
    return reply.text


async def test_a_turn_waits_for_the_sign_in_and_goes_on_with_the_persons_own_identity(notes, store, caplog):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("connect_notes", {}, id="c1")]),
            Step(calls=[Call("whoami", {}, id="c2")]),
            Step(text="You are alice."),
        ]
    )
    agent, host = await open_agent(notes, store, llm)
    try:
        # nerve's own tools for shared files are always listed; no server tool is before anyone connected.
        servers = [t.name for t in agent.tools() if t.server != FILES_SERVER]
        assert servers == ["connect_notes"], "no tools before anyone connected"
        shown = Shown()
        parked = await agent.reply(ask("U1", event_id="E1"), shown)
        assert "Connect button" in parked.text
        [needed] = shown.sign_ins()
        assert needed.server == "notes" and needed.person == "slack:T1:U1"
        assert await store.waiting_in(KEY) is not None, "the turn is parked in the store"
        replayed = await agent.reply(ask("U1", event_id="E1"), Shown())
        assert replayed.text.startswith("Waiting for you to sign in"), "told what it waits on"

        assert await sign_in_and_resume(agent, shown, "alice") == "You are alice."
        results = tool_results(llm)
        assert "Connected to notes" in results["c1"] and "whoami" in results["c1"]
        assert "alice" in results["c2"]
        assert "call whoami by alice" in notes.log_lines()
        assert "whoami" in [t.name for t in agent.tools()], "the server's tools are offered now"
        assert not [r for r in caplog.records if r.levelname == "ERROR"], "a sign-in is not an error"
    finally:
        await host.aclose()


async def test_a_second_person_is_asked_separately_and_never_gets_the_first_ones_account(notes, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("connect_notes", {}, id="a1")]),
            Step(text="connected"),
            Step(calls=[Call("whoami", {}, id="b1")]),
            Step(calls=[Call("whoami", {}, id="b2")]),
            Step(text="You are bob."),
        ]
    )
    agent, host = await open_agent(notes, store, llm)
    try:
        first = Shown()
        await agent.reply(ask("U1", event_id="E1"), first)
        await sign_in_and_resume(agent, first, "alice")

        second = Shown()
        parked = await agent.reply(ask("U2", event_id="E2"), second)
        [needed] = second.sign_ins()
        assert needed.person == "slack:T1:U2", "bob is asked for his own account"
        assert "Connect button" in parked.text
        assert await sign_in_and_resume(agent, second, "bob") == "You are bob."
        results = tool_results(llm)
        assert "bob" in results["b2"] and "alice" not in results["b2"]
        assert [line for line in notes.log_lines() if "whoami" in line] == ["call whoami by bob"] * 2
    finally:
        await host.aclose()


async def test_a_sign_in_link_works_once_and_a_wrong_issuer_is_refused(notes, store):
    llm = ScriptedLLM([Step(calls=[Call("connect_notes", {}, id="c1")]), Step(text="ok")])
    agent, host = await open_agent(notes, store, llm)
    assert agent.connections is not None
    try:
        shown = Shown()
        await agent.reply(ask("U1"), shown)
        [needed] = shown.sign_ins()
        came_back = await browser_signs_in(needed, "alice")
        from bot.errors import SignInFailed

        with pytest.raises(SignInFailed, match="issuer"):
            await agent.connections.sign_ins.complete(
                came_back["state"], came_back["code"], "https://evil.example", None
            )
        with pytest.raises(SignInFailed, match="already used or has expired"):
            await agent.connections.sign_ins.complete(
                came_back["state"], came_back["code"], came_back["iss"], None
            )
        assert not await agent.connections.of(KEY, "U1"), "nothing stored from a refused sign-in"
    finally:
        await host.aclose()


async def test_tokens_are_sealed_at_rest_survive_a_restart_and_disconnect_revokes_them(
    notes, store, store_backend
):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("connect_notes", {}, id="c1")]),
            Step(text="connected"),
        ]
    )
    agent, host = await open_agent(notes, store, llm)
    shown = Shown()
    await agent.reply(ask("U1"), shown)
    await sign_in_and_resume(agent, shown, "alice")
    await host.aclose()

    stored = await store.stored_tokens("notes", "slack:T1:U1")
    assert stored is not None
    access = Vault(SECRET).open(stored.secret)["token"]["access_token"]
    stored_bytes = await store_backend.everything_stored()
    assert stored_bytes, "the check reads what the database keeps"
    assert not any(access.encode() in raw for raw in stored_bytes), "tokens are never stored in the clear"

    # A new process (new host and agent, same store): the connection is still there.
    later = ScriptedLLM(
        [
            Step(calls=[Call("whoami", {}, id="w1")]),
            Step(text="alice again"),
            Step(calls=[Call("whoami", {}, id="w2")]),
            Step(text="connect first"),
        ]
    )
    agent, host = await open_agent(notes, store, later)
    try:
        assert "whoami" in [t.name for t in agent.tools()], "the catalog comes from a stored connection"
        reply = await agent.reply(ask("U1", "again?", event_id="E9"))
        assert reply.text == "alice again" and "alice" in tool_results(later)["w1"]
        assert agent.connections is not None
        [connection] = await agent.connections.of(KEY, "U1")
        assert connection.server == "notes"

        assert await agent.connections.disconnect(KEY, "U1", "notes")
        assert await agent.connections.of(KEY, "U1") == []
        async with httpx2.AsyncClient() as http:
            probe = await http.post(notes.mcp_url, json={}, headers={"Authorization": f"Bearer {access}"})
        assert probe.status_code == 401, "Disconnect revoked the token at the server"
        assert "whoami" in [t.name for t in agent.tools()], "the tools stay known"
        shown = Shown()
        await agent.reply(ask("U1", "and now?", event_id="E10"), shown)
        assert [s.server for s in shown.sign_ins()] == ["notes"], "after Disconnect the person is asked again"
        assert "w2" not in tool_results(later), "no call ran without the person's own sign-in"
    finally:
        await host.aclose()


async def test_a_changed_secret_key_means_signing_in_again_not_a_crash(notes, store):
    llm = ScriptedLLM([Step(calls=[Call("connect_notes", {}, id="c1")]), Step(text="connected")])
    agent, host = await open_agent(notes, store, llm)
    shown = Shown()
    await agent.reply(ask("U1"), shown)
    await sign_in_and_resume(agent, shown, "alice")
    await host.aclose()

    later = ScriptedLLM([Step(calls=[Call("connect_notes", {}, id="w1")]), Step(text="sign in again")])
    agent, host = await open_agent(notes, store, later, secret="another-secret-key-entirely")
    try:
        shown = Shown()
        async with asyncio.timeout(30):
            await agent.reply(ask("U1", "who?", event_id="E5"), shown)
        assert [s.server for s in shown.sign_ins()] == ["notes"]
    finally:
        await host.aclose()


async def test_a_token_that_expires_is_refreshed_without_asking_the_person_again(tmp_path, store):
    notes = await start_server(
        tmp_path, "--port", "0", "--allow-redirect-uri", CALLBACK, "--token-lifetime", "61"
    )
    try:
        llm = ScriptedLLM(
            [
                Step(calls=[Call("connect_notes", {}, id="c1")]),
                Step(text="connected"),
                Step(calls=[Call("whoami", {}, id="w1")]),
                Step(text="still alice"),
            ]
        )
        agent, host = await open_agent(notes, store, llm)
        try:
            shown = Shown()
            await agent.reply(ask("U1"), shown)
            await sign_in_and_resume(agent, shown, "alice")
            # nerve refreshes a minute before expiry: a 61 s token is due for refresh after 1 s.
            await asyncio.sleep(1.5)
            again = Shown()
            reply = await agent.reply(ask("U1", "who now?", event_id="E2"), again)
            assert reply.text == "still alice" and not again.sign_ins()
            assert "alice" in tool_results(llm)["w1"]
        finally:
            await host.aclose()
    finally:
        await stop_server(notes)


async def test_a_call_that_needs_more_scope_asks_the_person_to_sign_in_again(notes, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("connect_notes", {}, id="c1")]),
            Step(text="connected"),
            Step(calls=[Call("delete_all_notes", {}, id="d1")]),
            Step(text="deleted"),
        ]
    )
    agent, host = await open_agent(notes, store, llm)
    try:
        shown = Shown()
        await agent.reply(ask("U1"), shown)
        await sign_in_and_resume(agent, shown, "alice")
        step_up = Shown()
        async with asyncio.timeout(30):
            parked = await agent.reply(ask("U1", "delete all my notes", event_id="E2"), step_up)
        assert step_up.sign_ins(), (parked.text, tool_results(llm).get("d1"))
        [needed] = step_up.sign_ins()
        assert "notes%3Aadmin" in needed.url or "notes:admin" in needed.url, needed.url
        assert "Connect button" in parked.text
        assert await sign_in_and_resume(agent, step_up, "alice") == "deleted"
        assert "call delete_all_notes by alice" in notes.log_lines()
    finally:
        await host.aclose()


async def test_a_server_that_wants_a_sign_in_without_an_auth_entry_is_reported_plainly(notes):
    plain = {"notes": ServerConfig(trustAnnotations=True, url=notes.mcp_url, allow_private_network=True)}
    async with MCPHost(plain) as host:
        [(name, reason)] = host.problems()
        assert name == "notes" and "needs sign-in" in reason and "auth" in reason, reason


async def test_a_new_authorization_server_voids_the_tokens_of_the_old_one(store):
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
    from pydantic import AnyUrl

    from bot.mcp.auth.tokens import StoredTokens

    def registered(issuer: str) -> OAuthClientInformationFull:
        return OAuthClientInformationFull(
            client_id=f"client-of-{issuer}", redirect_uris=[AnyUrl(CALLBACK)], issuer=issuer
        )

    tokens = StoredTokens(store, Vault(SECRET), server="notes", person="slack:T1:U1", registration=CALLBACK)
    await tokens.set_client_info(registered("https://old-issuer.example"))
    await tokens.set_tokens(OAuthToken(access_token="old-access", refresh_token="old-refresh"))
    assert (await tokens.get_tokens()) is not None

    # The server now names another authorization server: the SDK registers there anew.
    later = StoredTokens(store, Vault(SECRET), server="notes", person="slack:T1:U1", registration=CALLBACK)
    await later.get_tokens()
    await later.set_client_info(registered("https://new-issuer.example"))
    assert await later.get_tokens() is None, "tokens of the old issuer are gone"
    assert await store.stored_tokens("notes", "slack:T1:U1") is None


def test_a_persons_sign_ins_are_kept_per_workspace_or_everywhere_where_the_platforms_ids_are_global():
    def key(platform: str, workspace: str) -> ConversationKey:
        return ConversationKey(platform=platform, workspace=workspace, channel="C1", thread="t1")

    assert person_of(key("slack", "T1"), "U1", PLATFORMS) == "slack:T1:U1"
    assert person_of(key("slack", "T2"), "U1", PLATFORMS) == "slack:T2:U1"
    # One Discord person in every guild and in their DMs.
    assert person_of(key("discord", "G1"), "42", PLATFORMS) == "discord:42"
    assert person_of(key("discord", "dm"), "42", PLATFORMS) == "discord:42"
    assert person_of(key("terminal", "me"), "me", PLATFORMS) == "terminal:me:me"
    # A platform the core was not told of keeps its people per workspace.
    assert person_of(key("discord", "G1"), "42", Platforms()) == "discord:G1:42"

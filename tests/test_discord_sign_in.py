"""Sign-in from Discord, through discord.py's own code paths against the fake Discord (REST and
gateway), `run_discord` serving the callback beside its operations endpoints, the real runtime (store,
the notes server with its own authorization server as a subprocess, the `openai` client against the
fake model service).

A mention is not an interaction, so its person gets the Connect link in a DM; a slash command's
person gets it as an ephemeral follow-up, after the answer replaced the deferred response (the first
follow-up of a deferral would take that public message's place). /connections lists the person's
connections with a Disconnect button; /connect starts one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import aiohttp
import pytest

from adapters.discord.app import run_discord
from bot.runtime import open_runtime
from bot.types import ConversationKey
from servers.notes_oauth.sign_in import sign_in_as
from tests.fakes.discord_api import FakeDiscord, Recorded, settings_for
from tests.fakes.llm_server import FakeCall, FakeLLMServer, tool_reply
from tests.ports import unused_port
from tests.test_notes_oauth_server import RunningServer, per_person_servers_file, start_server, stop_server
from tests.test_slack_sign_in import Model, who_the_tool_said, whoami

SECRET = "a-test-secret-key-long-enough"
ORIGINAL = r"/webhooks/\d+/[^/]+/messages/@original"
FOLLOW_UP = r"/webhooks/\d+/[^/]+"
CHANNEL_POST = r"/channels/\d+/messages"
EPHEMERAL = 64


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[RunningServer]:
    server = await start_server(tmp_path, "--port", "0")
    try:
        yield server
    finally:
        await stop_server(server)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as discord_fake:
        yield discord_fake


def link_urls(body: Any) -> list[str]:
    """The link buttons of a message body."""
    if not isinstance(body, dict):
        return []
    return [c["url"] for row in body.get("components") or [] for c in row["components"] if c.get("url")]


def custom_ids(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    return [
        c["custom_id"] for row in body.get("components") or [] for c in row["components"] if "custom_id" in c
    ]


def dms_to(fake: FakeDiscord, user_id: int) -> list[Recorded]:
    channel = fake.dm_channels.get(user_id)
    return [] if channel is None else fake.find("POST", f"/channels/{channel}/messages")


@contextlib.asynccontextmanager
async def running(fake: FakeDiscord, settings: Any, agent: Any) -> AsyncIterator[None]:
    task = asyncio.create_task(run_discord(agent, settings))
    try:
        await fake.wait_ready(within=15)
        await fake.wait_until(lambda: any(c["name"] == "connections" for c in fake.commands))
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_discord_people_get_their_link_privately_and_the_turn_goes_on_after_the_callback(
    tmp_path, notes, fake
):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    servers = per_person_servers_file(tmp_path, notes.mcp_url)
    model = Model([tool_reply(FakeCall(name="connect_notes")), whoami(), who_the_tool_said, whoami()])
    async with FakeLLMServer(model) as llm, aiohttp.ClientSession() as http:
        settings = settings_for(
            fake,
            nerve_http_port=port,
            nerve_db=str(tmp_path / "nerve.db"),
            nerve_mcp_config=str(servers),
            nerve_public_url=public,
            nerve_secret_key=SECRET,
            openai_base_url=llm.base_url,
            openai_api_key="test-key",
            nerve_model="test-model",
        )
        alice, bob = fake.user("alice"), fake.user("bob")
        async with open_runtime(settings) as runtime, running(fake, settings, runtime.agent):
            # A mention: no interaction, so the link comes in a DM, never in the channel.
            await fake.user_says(alice, "who am I at notes?", mention_bot=True)
            await fake.wait_until(lambda: bool(dms_to(fake, alice.id)), within=30)
            [dm] = dms_to(fake, alice.id)
            [url] = link_urls(dm.body())
            assert "yours only" in dm.body()["content"]
            state = parse_qs(urlparse(url).query)["state"][0]
            in_channel = [r.body() for r in fake.find("POST", f"/channels/{fake.channel_id}/messages")]
            assert state not in json.dumps(in_channel)

            location = await sign_in_as(url, "alice")
            assert location.startswith(f"{public}/oauth/callback?")
            async with http.get(location) as page:
                assert page.status == 200
                assert "Connected to notes — you can go back to Discord." in await page.text()
            # Goes on at once, not at the next sweep (15 s).
            await fake.wait_until(
                lambda: any("as alice" in m["content"] for m in fake.bot_messages()), within=12
            )
            assert notes.log_lines().count("call whoami by alice") == 1

            # /ask: the link is an ephemeral follow-up, after the answer took the deferred response.
            await fake.slash(bob, "ask", {"question": "and who am I?"}, channel_id=fake.channel_id)
            await fake.wait_until(lambda: bool(follow_ups_with_links(fake)), within=30)
            [follow_up] = follow_ups_with_links(fake)
            assert follow_up.body()["flags"] & EPHEMERAL
            assert link_urls(follow_up.body()) != [url]
            answered = [r for r in fake.find("PATCH", ORIGINAL) if "Connect button" in content_of(r)]
            assert answered and answered[0].at <= follow_up.at
            assert not dms_to(fake, bob.id)

            # /connections: alice's own, with a Disconnect button; the click disconnects her.
            listing = await fake.slash(alice, "connections", channel_id=fake.channel_id)
            token = listing["token"]
            await fake.wait_until(lambda: bool(listed(fake, token)), within=15)
            [message] = listed(fake, token)
            assert message.body()["flags"] & EPHEMERAL and "notes" in message.body()["content"]
            [button] = custom_ids(message.body())
            assert button == "nerve:dc:notes"
            [shown] = [
                m for m in fake.messages.values() if m.get("interaction_token") == token and custom_ids(m)
            ]
            click = await fake.click(alice, shown, button)
            await fake.wait_until(
                lambda: bool(told(fake, click["token"], "Disconnected from notes")), within=15
            )
            connections = runtime.agent.connections
            assert connections is not None
            anywhere = ConversationKey(platform="discord", workspace="-", channel="-", thread="-")
            assert await connections.of(anywhere, str(alice.id)) == []

            # /connect: bob starts his sign-in himself; the link is his alone.
            connecting = await fake.slash(bob, "connect", {"server": "notes"}, channel_id=fake.channel_id)
            await fake.wait_until(lambda: bool(told(fake, connecting["token"], "yours only")), within=30)
            [his] = told(fake, connecting["token"], "yours only")
            assert link_urls(his.body())
        assert model.moves == []


def content_of(request: Recorded) -> str:
    body = request.body()
    return str(body.get("content") or "") if isinstance(body, dict) else ""


def follow_ups_with_links(fake: FakeDiscord) -> list[Recorded]:
    return [r for r in fake.find("POST", FOLLOW_UP) if link_urls(r.body())]


def listed(fake: FakeDiscord, token: str) -> list[Recorded]:
    return [r for r in fake.find("POST", f"/webhooks/\\d+/{re.escape(token)}") if custom_ids(r.body())]


def told(fake: FakeDiscord, token: str, words: str) -> list[Recorded]:
    return [r for r in fake.find("POST", f"/webhooks/\\d+/{re.escape(token)}") if words in content_of(r)]

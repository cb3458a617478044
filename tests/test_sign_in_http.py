"""The sign-in callback and the client metadata document, served beside the operations endpoints.

The whole runtime as `nerve slack` opens it (real store, the real notes server with its own
authorization server as a subprocess, the real `openai` client against the local fake model
service); the browser is played by the notes server's own sign-in helper, and lands on the callback
served here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from adapters.oauth_http import NOT_A_SIGN_IN, SignInEndpoints, sign_in_endpoints
from adapters.ops_http import OpsEndpoints, PlatformLink, always
from bot.config import Settings
from bot.runtime import Runtime, open_runtime
from bot.types import ConversationKey, Incoming, SignedIn, TurnEvent
from servers.notes_oauth.sign_in import sign_in_as
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.ports import unused_port
from tests.test_notes_oauth_server import RunningServer, start_server, stop_server

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1700.1")
SECRET = "a-test-secret-key-long-enough"


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[RunningServer]:
    server = await start_server(tmp_path, "--port", "0")
    try:
        yield server
    finally:
        await stop_server(server)


def settings_for(tmp_path: Path, notes: RunningServer, llm: FakeLLMServer, public_url: str) -> Settings:
    servers = tmp_path / "mcp.json"
    entry = {"url": notes.mcp_url, "allowPrivateNetwork": True, "auth": {"type": "oauth", "identity": "user"}}
    servers.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    values: dict[str, Any] = {
        "nerve_db": str(tmp_path / "nerve.db"),
        "nerve_mcp_config": str(servers),
        "openai_base_url": llm.base_url,
        "openai_api_key": "test-key",
        "nerve_model": "test-model",
        "nerve_llm_max_retries": 0,
        "nerve_secret_key": SECRET,
        "nerve_public_url": public_url,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


class Served:
    """The operations endpoints with the sign-in endpoints beside them, as the front ends serve them."""

    def __init__(self, runtime: Runtime, port: int) -> None:
        self.resumed: list[SignedIn] = []
        endpoints = sign_in_endpoints(runtime.agent, runtime.settings.nerve_public_url, "Slack")
        assert isinstance(endpoints, SignInEndpoints)
        endpoints.resume = self.resumed.append
        self.ops = OpsEndpoints(runtime.agent, PlatformLink("Slack"))
        self.ops.platform.connected(always)
        self.ops.routes.append(endpoints.install)
        self.port = port


async def follow(http: aiohttp.ClientSession, location: str) -> tuple[int, str, dict[str, str]]:
    async with http.get(location, allow_redirects=False) as response:
        return response.status, await response.text(), dict(response.headers)


async def test_the_browser_lands_on_the_callback_which_connects_the_person_and_hands_on_the_waiting_turn(
    tmp_path, notes
):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    script = [tool_reply(FakeCall(name="connect_notes", id="c1")), reply("Connected, go on.")]
    async with FakeLLMServer(script) as llm, aiohttp.ClientSession() as http:
        settings = settings_for(tmp_path, notes, llm, public)
        async with open_runtime(settings) as runtime:
            served = Served(runtime, port)
            async with served.ops.serving("127.0.0.1", port):
                needed: list[TurnEvent] = []

                async def progress(event: TurnEvent) -> None:
                    if event.kind == "ask" and event.ask is not None and event.ask.sign_in is not None:
                        needed.append(event)

                asked = Incoming(key=KEY, text="my notes?", user_id="U1")
                parked = await runtime.agent.reply(asked, progress)
                assert "Connect button" in parked.text
                [event] = needed
                assert event.ask is not None and event.ask.sign_in is not None
                location = await sign_in_as(event.ask.sign_in.url, "alice")
                assert location.startswith(f"{public}/oauth/callback?")

                status, page, headers = await follow(http, location)
                assert status == 200
                assert "Connected to notes — you can go back to Slack." in page
                code = dict(part.split("=", 1) for part in location.split("?", 1)[1].split("&"))["code"]
                assert code not in page, "the page never shows what the browser brought"
                assert headers["Cache-Control"] == "no-store" and headers["Referrer-Policy"] == "no-referrer"
                assert headers["Content-Type"].startswith("text/html")

                [signed] = served.resumed
                assert signed.server == "notes" and signed.person == "slack:T1:U1"
                assert len(signed.request_ids) == 1
                final = await runtime.agent.resume(signed.request_ids[0])
                assert final is not None and final.text == "Connected, go on."
                assert await runtime.agent.connections.of(KEY, "U1") != []  # type: ignore[union-attr]

                # The same link again: used once already. Then no sign-in at all.
                status, page, _ = await follow(http, location)
                assert status == 400 and "already used or has expired" in page
                status, page, _ = await follow(http, f"{public}/oauth/callback")
                assert status == 400 and NOT_A_SIGN_IN.split(".")[0] in page
                async with http.get(f"{public}/healthz") as health:
                    assert health.status == 200, "the operations endpoints still answer beside it"
        assert len(served.resumed) == 1


async def test_a_sign_in_the_person_refused_is_a_400_page_and_connects_nothing(tmp_path, notes):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    async with FakeLLMServer([]) as llm, aiohttp.ClientSession() as http:
        async with open_runtime(settings_for(tmp_path, notes, llm, public)) as runtime:
            connections = runtime.agent.connections
            assert connections is not None
            served = Served(runtime, port)
            async with served.ops.serving("127.0.0.1", port):
                started = await connections.connect(KEY, "U1", "notes")
                assert started.sign_in is not None
                location = await sign_in_as(started.sign_in.url, "alice", allow=False)
                status, page, _ = await follow(http, location)
                assert status == 400
                assert "notes did not sign you in (access_denied)" in page
                assert await connections.of(KEY, "U1") == []
        assert served.resumed == []


async def test_nerve_serves_its_client_metadata_document_under_its_public_address(tmp_path, notes):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    async with (
        FakeLLMServer([]) as llm,
        aiohttp.ClientSession() as http,
        open_runtime(settings_for(tmp_path, notes, llm, public + "/")) as runtime,
    ):
        served = Served(runtime, port)
        async with served.ops.serving("127.0.0.1", port), http.get(f"{public}/oauth/client.json") as response:
            assert response.status == 200
            document = await response.json()
    assert document["client_id"] == f"{public}/oauth/client.json"
    assert document["client_name"] == "nerve"
    assert document["redirect_uris"][0] == f"{public}/oauth/callback"
    assert document["token_endpoint_auth_method"] == "none"
    assert "authorization_code" in document["grant_types"] and document["response_types"] == ["code"]


async def test_a_nerve_without_per_person_servers_serves_no_sign_in_endpoints():
    without = SimpleNamespace(connections=None)
    assert sign_in_endpoints(without, "https://nerve.example", "Slack") is None  # type: ignore[arg-type]
    await asyncio.sleep(0)

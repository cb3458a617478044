"""Sign-in from Slack, as a new user would meet it: `nerve slack` as a real process, the notes server
(its own authorization server) as another, the mock Slack Web API, the fake model service.

A person mentions nerve; the model wants notes; the person alone gets a Connect button (an ephemeral
message, never one the channel sees); their browser signs in and lands on nerve's own callback page;
the thread gets the answer with their identity, and the notes server's log shows the call was theirs.
A second person is asked for their own account. A restart keeps the connection; `/nerve connections`
lists it and Disconnect ends it, after which the next call asks again.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import aiohttp
import pytest

from adapters.settings import Settings
from bot.runtime import open_runtime
from servers.notes_oauth.sign_in import sign_in_as
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, Step, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, ApiCall, FakeSlack
from tests.ports import unused_port
from tests.test_cli import nerve_env
from tests.test_notes_oauth_server import RunningServer, per_person_servers_file, start_server, stop_server
from tests.test_slack_approval_restart import nerve_slack, post_signed
from tests.test_slack_harness import mention, sign
from tests.test_slack_runner import running

CHANNEL = "C0CHANNEL"
ALICE, BOB = "U0ALICE", "U0BOB"
SECRET = "a-test-secret-key-long-enough"


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[RunningServer]:
    server = await start_server(tmp_path, "--port", "0")
    try:
        yield server
    finally:
        await stop_server(server)


class Model:
    """The model's moves in order; a move may depend on the request (to repeat what a tool said)."""

    def __init__(self, moves: list[Step | Callable[[dict[str, Any]], Step]]) -> None:
        self.moves = moves

    def __call__(self, request: dict[str, Any]) -> Step:
        if not self.moves:
            return reply("(the script has ended)")
        move = self.moves.pop(0)
        return move(request) if callable(move) else move


def who_the_tool_said(request: dict[str, Any]) -> Reply:
    """An answer made of the last tool result: the identity the notes server saw."""
    said = str([m for m in request["messages"] if m.get("role") == "tool"][-1]["content"])
    name = re.search(r'"result": "([^"]+)"', said)
    return reply(f"You are signed in to notes as {name.group(1) if name else said}.")


def whoami() -> Reply:
    return tool_reply(FakeCall(name="whoami"))


def links_to(slack: FakeSlack, user: str) -> list[ApiCall]:
    """The ephemeral messages with a Connect button that `user` was shown."""
    return [
        c
        for c in slack.calls_of("chat.postEphemeral")
        if c.body.get("user") == user and "Connect notes" in json.dumps(c.body.get("blocks"))
    ]


def notes_to(slack: FakeSlack, user: str, words: str) -> list[str]:
    told = [c.body for c in slack.calls_of("chat.postEphemeral") if c.body.get("user") == user]
    return [str(body.get("text")) for body in told if words in str(body.get("text"))]


def button_url(call: ApiCall) -> str:
    [url] = [
        element["url"]
        for block in call.body["blocks"]
        if block.get("type") == "actions"
        for element in block["elements"]
        if element.get("url")
    ]
    return str(url)


def said_in(slack: FakeSlack, root: str, words: str) -> list[str]:
    return [p.text for p in slack.thread(CHANNEL, root) if words in p.text]


def command(text: str, user: str) -> str:
    return urlencode(
        {
            "command": "/nerve",
            "text": text,
            "team_id": TEAM_ID,
            "channel_id": CHANNEL,
            "channel_name": "general",
            "user_id": user,
            "user_name": user.lower(),
            "trigger_id": "1.2.3",
            "response_url": "http://127.0.0.1:9/unused",
            "token": "legacy",
        }
    )


def disconnect_click(user: str, button: dict[str, Any]) -> str:
    """Slack's `block_actions` body for a click on a button of an ephemeral message."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0000APP",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": "1600000000.999999",
            "channel_id": CHANNEL,
            "is_ephemeral": True,
        },
        "trigger_id": "1.2.3",
        "team": {"id": TEAM_ID, "domain": "nerve-test"},
        "channel": {"id": CHANNEL, "name": "general"},
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "b",
                "value": button["value"],
                "action_ts": "1600000000.999999",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


async def test_a_person_signs_in_from_slack_and_the_thread_gets_the_answer_as_them(tmp_path, notes):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    servers = per_person_servers_file(tmp_path, notes.mcp_url)
    model = Model(
        [
            tool_reply(FakeCall(name="connect_notes")),  # alice, before anyone connected
            whoami(),  # her turn goes on once she signed in
            who_the_tool_said,
            whoami(),  # bob: asked for his own account
            whoami(),  # alice again, after the restart
            who_the_tool_said,
            whoami(),  # alice after Disconnect: asked again
        ]
    )
    async with FakeSlack() as slack, FakeLLMServer(model) as llm, aiohttp.ClientSession() as http:
        env = nerve_env(
            tmp_path,
            NERVE_MCP_CONFIG=str(servers),
            SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_SIGNING_SECRET="test-signing-secret",
            SLACK_API_BASE_URL=slack.api_url,
            NERVE_HTTP_HOST="127.0.0.1",
            NERVE_HTTP_PORT=str(port),
            NERVE_PUBLIC_URL=public,
            NERVE_SECRET_KEY=SECRET,
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test-key",
            NERVE_MODEL="test-model",
            NERVE_LOG_LEVEL="INFO",
        )
        env.pop("SLACK_APP_TOKEN", None)

        async with nerve_slack(env) as (_, url):
            # Alice asks; the model wants notes, which nobody has connected yet.
            root = "1600000000.300100"
            body = mention(f"<@{BOT_USER_ID}> who am I at notes?", ts=root, user=ALICE)
            assert await post_signed(http, url, json.dumps(body), "application/json") == 200
            await slack.wait_for(lambda s: bool(links_to(s, ALICE)), 60)
            [link] = links_to(slack, ALICE)
            assert link.body["channel"] == CHANNEL and link.body["thread_ts"] == root
            assert "yours only" in json.dumps(link.body["blocks"])
            await slack.wait_for(lambda s: bool(said_in(s, root, "Connect button")), 30)
            sign_in_url = button_url(link)
            state = parse_qs(urlparse(sign_in_url).query)["state"][0]
            public_calls = json.dumps([c.body for c in slack.calls if c.method != "chat.postEphemeral"])
            assert state not in public_calls, "the link is never in a message the channel sees"

            # Her browser: the notes sign-in page, then back to nerve's callback.
            location = await sign_in_as(sign_in_url, "alice")
            assert location.startswith(f"{public}/oauth/callback?")
            async with http.get(location) as page:
                assert page.status == 200
                assert "Connected to notes — you can go back to Slack." in await page.text()
            # Goes on at once in the process that got the callback, not at the next sweep (15 s).
            await slack.wait_for(lambda s: bool(said_in(s, root, "as alice")), 12)
            assert len(said_in(slack, root, "alice")) == 1, "the answer comes once"
            assert notes.log_lines().count("call whoami by alice") == 1

            # Bob is asked for his own account, not given Alice's.
            other = "1600000000.300200"
            body = mention(f"<@{BOT_USER_ID}> and who am I?", ts=other, user=BOB)
            assert await post_signed(http, url, json.dumps(body), "application/json") == 200
            await slack.wait_for(lambda s: bool(links_to(s, BOB)), 60)
            [bobs] = links_to(slack, BOB)
            assert button_url(bobs) != sign_in_url and bobs.body["thread_ts"] == other
            await slack.wait_for(lambda s: bool(said_in(s, other, "Connect button")), 30)
            assert notes.log_lines().count("call whoami by alice") == 1, "no call was made with her token"

        # A new process finds Alice's connection in the store.
        async with nerve_slack(env) as (_, url):
            again = "1600000000.300300"
            body = mention(f"<@{BOT_USER_ID}> who am I now?", ts=again, user=ALICE)
            assert await post_signed(http, url, json.dumps(body), "application/json") == 200
            await slack.wait_for(lambda s: bool(said_in(s, again, "as alice")), 60)
            assert len(links_to(slack, ALICE)) == 1, "no new sign-in after the restart"
            assert notes.log_lines().count("call whoami by alice") == 2

            # /nerve connections: only she sees it, with a Disconnect button.
            typed = command("connections", ALICE)
            headers = {**sign(typed), "Content-Type": "application/x-www-form-urlencoded"}
            async with http.post(url, data=typed, headers=headers) as answer:
                assert answer.status == 200
                listed = await answer.json()
            assert listed["response_type"] == "ephemeral"
            [button] = [b["accessory"] for b in listed["blocks"] if "accessory" in b]
            assert button["value"] == "notes"
            click = disconnect_click(ALICE, button)
            assert await post_signed(http, url, click, "application/x-www-form-urlencoded") == 200
            await slack.wait_for(lambda s: bool(notes_to(s, ALICE, "Disconnected from notes")), 30)

            # Her next call asks her to sign in again.
            last = "1600000000.300400"
            body = mention(f"<@{BOT_USER_ID}> who am I after that?", ts=last, user=ALICE)
            assert await post_signed(http, url, json.dumps(body), "application/json") == 200
            await slack.wait_for(lambda s: len(links_to(s, ALICE)) == 2, 60)
            assert links_to(slack, ALICE)[-1].body["thread_ts"] == last
            assert notes.log_lines().count("call whoami by alice") == 2
        assert model.moves == [], "every scripted move was used"


async def test_in_socket_mode_the_callback_is_served_on_the_operations_port_and_the_turn_goes_on(
    tmp_path, notes
):
    port = unused_port()
    public = f"http://127.0.0.1:{port}"
    servers = per_person_servers_file(tmp_path, notes.mcp_url)
    model = Model([tool_reply(FakeCall(name="connect_notes")), whoami(), who_the_tool_said])
    async with FakeSlack() as slack, FakeLLMServer(model) as llm, aiohttp.ClientSession() as http:
        values: dict[str, Any] = {
            "slack_bot_token": "xoxb-test-token",
            "slack_app_token": "xapp-test",
            "slack_api_base_url": slack.api_url,
            "nerve_http_port": port,
            "nerve_db": str(tmp_path / "nerve.db"),
            "nerve_mcp_config": str(servers),
            "nerve_public_url": public,
            "nerve_secret_key": SECRET,
            "openai_base_url": llm.base_url,
            "openai_api_key": "test-key",
            "nerve_model": "test-model",
        }
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        async with open_runtime(settings) as runtime, running(runtime.agent, settings) as mode:
            assert mode == "socket-mode"
            # /nerve connect before anything asked for it: the button, to the typist alone.
            await slack.send_envelope(slash("connect notes", BOB), kind="slash_commands")
            await slack.wait_for(lambda s: bool(links_to(s, BOB)), 30)
            [bobs] = links_to(slack, BOB)
            assert bobs.body["channel"] == CHANNEL and "thread_ts" not in bobs.body

            root = "1600000000.400100"
            await slack.send_envelope(mention(f"<@{BOT_USER_ID}> who am I?", ts=root, user=ALICE))
            await slack.wait_for(lambda s: bool(links_to(s, ALICE)), 30)
            location = await sign_in_as(button_url(links_to(slack, ALICE)[0]), "alice")
            assert location.startswith(f"{public}/oauth/callback?")
            async with http.get(location) as page:
                assert page.status == 200 and "Connected to notes" in await page.text()
            await slack.wait_for(lambda s: bool(said_in(s, root, "as alice")), 12)
            async with http.get(f"{public}/oauth/client.json") as document:
                assert (await document.json())["client_id"] == f"{public}/oauth/client.json"
        assert notes.log_lines().count("call whoami by alice") == 1
        assert model.moves == []


def slash(text: str, user: str) -> dict[str, Any]:
    """A `/nerve` command as Socket Mode delivers it."""
    return {
        "command": "/nerve",
        "text": text,
        "team_id": TEAM_ID,
        "channel_id": CHANNEL,
        "channel_name": "general",
        "user_id": user,
        "user_name": user.lower(),
        "trigger_id": "1.2.3",
        "response_url": "http://127.0.0.1:9/unused",
        "token": "legacy",
    }

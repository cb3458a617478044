"""The Slack inbox keeps only what dedupe and replay need: never a token, never the whole request body."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.llm_server import Step, reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import core, mention, rig, settings_for, sign, user_texts
from tests.test_slack_runner import running

SECRET = "xoxb-secret-0000-never-store-me"
# What the stored entry may hold: the event id, where it happened, who said what, and when.
KEPT_TOP = {"type", "event_id", "team_id", "event"}
KEPT_EVENT = {
    "type",
    "subtype",
    "user",
    "bot_id",
    "channel",
    "channel_type",
    "ts",
    "thread_ts",
    "text",
    "team",
}


def with_secrets(body: dict[str, Any]) -> dict[str, Any]:
    """A delivery as Slack's legacy apps send it: the verification token and more than a turn needs."""
    body["token"] = SECRET
    body["authorizations"] = [{"team_id": "T0000TEAM", "user_id": BOT_USER_ID, "is_bot": True}]
    body["event"]["blocks"] = [{"type": "rich_text", "block_id": SECRET}]
    return body


def database_bytes(folder: Path) -> bytes:
    """Every byte SQLite keeps for the database: the file, its WAL and shared memory."""
    return b"".join(path.read_bytes() for path in sorted(folder.glob("nerve.db*")))


async def test_a_delivery_carrying_a_token_leaves_no_trace_of_it_in_the_database(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("The air is fine.")]) as r:
        body = with_secrets(mention(f"<@{BOT_USER_ID}> how is the air?"))
        assert await r.deliver(body) == 200
        await r.settle()
        assert [p.text for p in r.slack.posted] == ["The air is fine."]

        rows = await r.backend.rows("SELECT * FROM inbox")
        assert len(rows) == 1 and SECRET not in repr(rows)
        assert SECRET.encode() not in b"".join(await r.backend.everything_stored())
    assert SECRET.encode() not in database_bytes(tmp_path)


async def test_an_unfinished_event_is_kept_without_its_body_and_answered_after_a_restart(
    tmp_path: Path,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def model(request: dict[str, Any]) -> Step:
        if not started.is_set():
            # The first process is stopped while the model is still thinking about this turn.
            started.set()
            await release.wait()
            return reply("too late")
        return reply("sorry for the wait")

    async with core(tmp_path, model) as c:
        settings = settings_for(c.slack)
        root = "1600000000.009100"
        body = with_secrets(mention(f"<@{BOT_USER_ID}> still there?", ts=root))
        raw = json.dumps(body)
        async with running(c.agent, settings) as url, aiohttp.ClientSession() as http:
            async with http.post(url, data=raw, headers=sign(raw)) as response:
                assert response.status == 200
            async with asyncio.timeout(10):
                await started.wait()
        release.set()

        [(event_id, payload)] = await c.store.unfinished_events("slack")
        stored = json.loads(payload)
        assert event_id == body["event_id"]
        assert set(stored) <= KEPT_TOP and set(stored["event"]) <= KEPT_EVENT
        assert stored["event"]["text"] == f"<@{BOT_USER_ID}> still there?"
        assert SECRET not in payload

        async with running(c.agent, settings):
            await c.inbox.wait_finished(body["event_id"])
        assert await c.store.unfinished_events("slack") == []
        assert user_texts(c.llm.requests[-1]) == ["still there?"]
        assert [p.text for p in c.slack.thread("C0CHANNEL", root)][-1] == "sorry for the wait"
        assert SECRET.encode() not in b"".join(await c.backend.everything_stored())
    assert SECRET.encode() not in database_bytes(tmp_path)

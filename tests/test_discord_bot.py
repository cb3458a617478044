"""The Discord bot end to end: real discord.py against a local fake Discord, the real Agent and store,
and the real `openai` client against a local fake model service."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.app import new_bot
from adapters.discord.client import LONG_LIVED
from adapters.discord.delivery import NO_MENTIONS
from adapters.discord.incoming import Job
from adapters.discord.render import EMBED_DESCRIPTION_LIMIT, EMBED_TOTAL_LIMIT, EMBEDS_PER_MESSAGE
from bot.agent import Agent
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import CallContext, ConversationKey, ToolResult, ToolSpec
from tests.conftest import ROOT, seed_servers
from tests.fakes.discord_api import FakeDiscord, Recorded, running_bot, settings_for
from tests.fakes.llm_server import FakeLLMServer, Reply, reply, tool_reply
from tests.ports import unused_port

CALLBACK = r"/interactions/\d+/[^/]+/callback"
ORIGINAL = r"/webhooks/\d+/[^/]+/messages/@original"
CHANNEL_POST = r"/channels/\d+/messages"
THREADS = r"/channels/\d+/messages/\d+/threads"


class WatchedInbox:
    """The real store's inbox, telling the test when a delivery was marked answered."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.finished = asyncio.Event()

    async def claim_event(self, platform: str, event_id: str, payload: str) -> bool:
        return await self.store.claim_event(platform, event_id, payload)

    async def finish_event(self, platform: str, event_id: str) -> None:
        await self.store.finish_event(platform, event_id)
        self.finished.set()

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        return await self.store.unfinished_events(platform)

    async def unfinished_payload(self, platform: str, event_id: str) -> str | None:
        return await self.store.unfinished_payload(platform, event_id)


class FakeTools:
    """A tool host with one deterministic tool (the real MCP path has its own test below)."""

    def __init__(
        self, result: str = '{"area_code": "A1001", "aqi": 42}', gate: asyncio.Event | None = None
    ) -> None:
        self.result = result
        self.gate = gate
        self.calls: list[dict[str, Any]] = []

    def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="get_environment_status",
                description="Air quality and weather of one area.\nMore detail.",
                parameters={"type": "object", "properties": {"area_code": {"type": "string"}}},
                server="env",
                original_name="get_environment_status",
            )
        ]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        self.calls.append(arguments)
        if self.gate is not None:
            await self.gate.wait()
        return ToolResult(content=self.result, latency_ms=312.0)

    def starting(self) -> list[str]:
        return []


@contextlib.asynccontextmanager
async def agent_for(
    llm_server: FakeLLMServer, store: SQLiteStore, host: Any = None, inbox: Any = None
) -> AsyncIterator[Agent]:
    """The real Agent, its model the real OpenAI client talking to the fake model service."""
    llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
    try:
        yield Agent(llm=llm, host=host or FakeTools(), store=store, inbox=inbox or store)
    finally:
        await llm.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def contents(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def button_ids(body: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in body.get("components") or [] for c in row["components"]]


async def final_answer(
    fake: FakeDiscord, channel_id: int | None = None, within: float = 10.0
) -> dict[str, Any]:
    """The bot's newest message once it carries the Tool results button (the live answer's last edit)."""

    def answered() -> list[dict[str, Any]]:
        return [m for m in fake.bot_messages(channel_id) if button_ids(m)]

    await fake.wait_until(lambda: bool(answered()), within=within)
    return answered()[-1]


def message_bodies(fake: FakeDiscord) -> list[Recorded]:
    """Every request that carried message content from the bot."""
    return [
        r
        for r in fake.requests
        if r.method in ("POST", "PATCH")
        and (r.path.startswith("/webhooks/") or re.fullmatch(r"/channels/\d+/messages(/\d+)?", r.path))
        and isinstance(r.body(), dict)
        and "content" in r.body()
    ]


async def test_ask_is_deferred_at_once_then_answered_with_a_tool_results_button_and_a_thread(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    script: list[Reply] = [
        tool_reply(("get_environment_status", '{"area_code": "A1001"}'), delay=1.0),
        reply("The air in A1001 is good (AQI 42)."),
    ]
    gate = asyncio.Event()
    async with (
        FakeLLMServer(script) as llm,
        agent_for(llm, store, FakeTools(gate=gate)) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("ada")
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        interaction = await fake.slash(
            user, "ask", {"question": "How is the air in A1001?"}, channel_id=fake.channel_id
        )
        (defer,) = await fake.wait_for("POST", CALLBACK)
        assert defer.json["type"] == 5
        assert defer.at - sent_at < 3.0, "Discord's limit for a first response"
        assert llm.remaining == 2, "the model had not answered yet when the defer went out"

        # While the tool runs, the deferred message shows what is happening.
        await fake.wait_until(
            lambda: any(
                "calling get_environment_status…" in r.body()["content"] for r in fake.find("PATCH", ORIGINAL)
            )
        )
        gate.set()

        await fake.wait_for("POST", THREADS)
        final = [r for r in fake.find("PATCH", ORIGINAL) if button_ids(r.body())][-1]
        body = final.body()
        assert "The air in A1001 is good" in body["content"]
        assert "🔧 get_environment_status · env ✓ 312 ms" in body["content"]
        assert button_ids(body)[0].startswith("nerve:tools:")
        assert body["allowed_mentions"]["parse"] == []
        assert final.path.split("/")[3] == interaction["token"]

        answer_id = fake._interactions[interaction["token"]]["original"]
        (thread_call,) = fake.find("POST", THREADS)
        assert thread_call.path == f"/channels/{fake.channel_id}/messages/{answer_id}/threads"
        assert fake.channels[answer_id]["type"] == 11, "the thread has the answer message's id"
        llm.assert_complete()


async def test_a_mention_in_the_ask_thread_continues_the_same_conversation(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    script = [reply("Paris is the capital of France."), reply("About 2.1 million people live there.")]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        user = fake.user("ada")
        interaction = await fake.slash(
            user, "ask", {"question": "What is the capital of France?"}, channel_id=fake.channel_id
        )
        await fake.wait_for("POST", THREADS)
        thread_id = fake._interactions[interaction["token"]]["original"]

        await fake.user_says(user, "How many people live there?", channel_id=thread_id, mention_bot=True)
        (posted,) = await fake.wait_for("POST", f"/channels/{thread_id}/messages")
        assert "2.1 million" in posted.body()["content"]
        seen = json.dumps(llm.last_messages())
        assert "What is the capital of France?" in seen
        assert "Paris is the capital of France." in seen
        assert "How many people live there?" in seen
        assert not fake.find("POST", CHANNEL_POST.replace(r"\d+", str(fake.channel_id))), (
            "nothing posted outside the thread"
        )


async def test_a_mention_in_a_channel_answers_as_a_reply_and_opens_a_thread_on_it(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("Hello!"), reply("Still here.")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("bob")
        mention = await fake.user_says(user, "hi there", mention_bot=True)
        (posted,) = await fake.wait_for("POST", f"/channels/{fake.channel_id}/messages")
        assert int(posted.body()["message_reference"]["message_id"]) == int(mention["id"])
        assert posted.body()["content"] == "Hello!"
        (thread_call,) = await fake.wait_for("POST", THREADS)
        assert thread_call.path.endswith(f"/messages/{mention['id']}/threads")

        # Without the message-content intent a plain follow-up arrives blank; a mention carries it.
        thread_id = int(mention["id"])
        await fake.user_says(user, "are you there?", channel_id=thread_id, mention_bot=True)
        await fake.wait_for("POST", f"/channels/{thread_id}/messages")
        assert "hi there" in json.dumps(llm.last_messages())


async def test_two_users_dms_stay_private(fake: FakeDiscord, store: SQLiteStore) -> None:
    script = [reply("Noted, your code is 1234."), reply("I don't know any code of yours yet.")]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        alice, bob = fake.user("alice"), fake.user("bob")
        await fake.user_dms(alice, "my secret code is 1234")
        await fake.wait_for("POST", f"/channels/{fake.dm_channels[alice.id]}/messages")
        await fake.user_dms(bob, "what is my code?")
        (to_bob,) = await fake.wait_for("POST", f"/channels/{fake.dm_channels[bob.id]}/messages")
        seen_for_bob = json.dumps(llm.requests[1]["messages"])
        assert "1234" not in seen_for_bob and "secret" not in seen_for_bob
        assert "1234" not in to_bob.body()["content"]
        assert not fake.find("POST", THREADS), "DMs never open threads"


async def test_everyone_in_model_output_pings_nobody(fake: FakeDiscord, store: SQLiteStore) -> None:
    script = [reply("@everyone @here <@&123> look!"), reply("@everyone again")]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        user = fake.user("eve")
        await fake.user_says(user, "shout", mention_bot=True)
        await fake.wait_for("POST", THREADS)
        await fake.slash(user, "ask", {"question": "shout again"}, channel_id=fake.channel_id)
        await fake.wait_for("POST", THREADS, count=2)
        bodies = message_bodies(fake)
        assert any("@everyone" in (r.body()["content"] or "") for r in bodies)
        for record in bodies:
            assert record.body()["allowed_mentions"] == NO_MENTIONS.to_dict(), record.path
            assert record.body()["allowed_mentions"]["parse"] == []


async def test_a_429_is_waited_out_and_the_reply_lands_exactly_once(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("Answer after the rate limit.")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        fake.rate_limit_next("POST", rf"/channels/{fake.channel_id}/messages", retry_after=0.2)
        user = fake.user("carl")
        await fake.user_says(user, "question", mention_bot=True)
        records = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages", count=2)
        assert [r.status for r in records] == [429, 200]
        assert records[1].at - records[0].at >= 0.2
        await fake.wait_for("POST", THREADS)
        answers = [m for m in fake.bot_messages(fake.channel_id) if "rate limit" in m["content"]]
        assert len(answers) == 1


async def test_a_redelivered_message_is_answered_once(fake: FakeDiscord, store: SQLiteStore) -> None:
    async with (
        FakeLLMServer([reply("Once."), reply("synced")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("dora")
        message = await fake.user_says(user, "hello", mention_bot=True)
        await fake.dispatch("MESSAGE_CREATE", message)
        await fake.wait_for("POST", THREADS)
        # A later conversation as a sync point: a second answer to the re-delivery would take its step.
        await fake.user_dms(user, "sync point")
        (synced,) = await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages")
        assert synced.body()["content"] == "synced"
        assert len(fake.find("POST", rf"/channels/{fake.channel_id}/messages")) == 1
        llm.assert_complete()


async def test_clicking_tool_results_shows_ephemeral_embeds_within_limits(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    big = json.dumps({"rows": ["x" * 100] * 300})  # far over one embed
    calls = tool_reply(
        *[("get_environment_status", json.dumps({"area_code": f"A{i:04d}"})) for i in range(12)]
    )
    async with (
        FakeLLMServer([calls, reply("Done.")]) as llm,
        agent_for(llm, store, FakeTools(result=big)) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("fay")
        await fake.user_says(user, "check twelve areas", mention_bot=True)
        message = await final_answer(fake, fake.channel_id)
        (custom_id,) = button_ids(message)
        assert len(fake.find("POST", f"/channels/{fake.channel_id}/messages")) == 1
        await fake.click(fake.user("gus"), message, custom_id)
        callbacks = await fake.wait_for("POST", CALLBACK)
        body = callbacks[-1].body()
        assert body["type"] == 4
        data = body["data"]
        assert data["flags"] & 64, "ephemeral"
        embeds = data["embeds"]
        assert 1 <= len(embeds) <= EMBEDS_PER_MESSAGE
        assert all(len(e["description"]) <= EMBED_DESCRIPTION_LIMIT for e in embeds)
        total = sum(
            len(e.get("title", ""))
            + len(e.get("description", ""))
            + sum(len(f["name"]) + len(f["value"]) for f in e.get("fields", []))
            + len(e.get("footer", {}).get("text", ""))
            for e in embeds
        )
        assert total <= EMBED_TOTAL_LIMIT
        assert embeds[0]["color"] == 0x2ECC71
        files = [p for p in callbacks[-1].parts if p.filename]
        assert files and files[0].filename == "tool-results.md"
        assert files[0].text.count("## get_environment_status") == 12


async def test_tool_results_after_a_restart_say_they_are_gone(fake: FakeDiscord, store: SQLiteStore) -> None:
    script = [tool_reply(("get_environment_status", '{"area_code": "A1001"}')), reply("Fine air.")]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent:
        async with running_bot(fake, agent):
            await fake.user_says(fake.user("hal"), "air?", mention_bot=True)
            message = await final_answer(fake, fake.channel_id)
        (custom_id,) = button_ids(message)
        async with running_bot(fake, agent):
            await fake.click(fake.user("ian"), message, custom_id)
            (callback,) = await fake.wait_for("POST", CALLBACK)
        assert "no longer available" in callback.body()["data"]["content"]
        assert callback.body()["data"]["flags"] & 64


async def test_an_expired_token_falls_back_to_a_channel_message(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("Late but here.", delay=0.5)]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        interaction = await fake.slash(
            fake.user("ivy"), "ask", {"question": "slow one"}, channel_id=fake.channel_id
        )
        await fake.wait_for("POST", CALLBACK)
        fake.expire_token(interaction["token"])
        (posted,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        answer_id = fake._interactions[interaction["token"]]["original"]
        assert posted.body()["content"] == "Late but here."
        assert int(posted.body()["message_reference"]["message_id"]) == answer_id
        await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages/{answer_id}/threads")


async def test_a_failing_turn_apologises_without_a_traceback(fake: FakeDiscord, store: SQLiteStore) -> None:
    class BrokenTools(FakeTools):
        def list_tools(self) -> list[ToolSpec]:
            raise RuntimeError("boom: internal detail")

    async with (
        FakeLLMServer([]) as llm,
        agent_for(llm, store, BrokenTools()) as agent,
        running_bot(fake, agent),
    ):
        await fake.user_dms(fake.user("jo"), "hello?")
        (posted,) = await fake.wait_for("POST", CHANNEL_POST)
        assert posted.body()["content"].startswith("Sorry — something went wrong on my side")
        assert "boom" not in posted.body()["content"] and "Traceback" not in posted.body()["content"]


async def test_after_a_403_the_bot_stops_posting_in_that_channel(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("one"), reply("two")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        fake.fail_next(
            "POST",
            rf"/channels/{fake.channel_id}/messages",
            status=403,
            code=50013,
            message="Missing Permissions",
        )
        user = fake.user("kim")
        await fake.user_says(user, "first", mention_bot=True)
        await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        await fake.user_says(user, "second", mention_bot=True)
        await fake.user_dms(user, "sync")  # the DM answer proves the second mention was handled
        await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages")
        assert len(fake.find("POST", rf"/channels/{fake.channel_id}/messages")) == 1
        assert not fake.find("POST", THREADS)


async def test_unfinished_messages_are_answered_after_a_restart(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    user = fake.user("lea")
    message_id = fake.snowflake()
    key = ConversationKey(
        platform="discord", workspace=str(fake.guild_id), channel=str(fake.channel_id), thread=str(message_id)
    )
    job = Job(
        kind="message",
        key=key,
        text="did you get this?",
        user_id=str(user.id),
        user_name="lea",
        event_id=f"m:{message_id}",
        channel_id=fake.channel_id,
        message_id=message_id,
        open_thread=True,
    )
    assert await store.claim_event("discord", job.event_id, job.to_json())
    inbox = WatchedInbox(store)
    async with (
        FakeLLMServer([reply("Yes, answering now.")]) as llm,
        agent_for(llm, store, inbox=inbox) as agent,
        running_bot(fake, agent),
    ):
        (posted,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        assert posted.body()["content"] == "Yes, answering now."
        await fake.wait_for("POST", THREADS)
        async with asyncio.timeout(5):
            await inbox.finished.wait()
        assert await store.unfinished_events("discord") == []


class SlowListing(WatchedInbox):
    """The inbox on a loaded database: once `slow` is set, listing the deliveries left unfinished
    waits for `release`; `listed` says when a listing has its list."""

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store)
        self.slow = False
        self.release = asyncio.Event()
        self.listed = asyncio.Event()

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        if self.slow:
            await self.release.wait()
        found = await super().unfinished_events(platform)
        self.listed.set()
        return found


async def test_a_message_that_comes_while_the_start_up_recovery_is_slow_is_answered_once(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    inbox = SlowListing(store)
    held = reply("Answered once.", stall_after=0, stall=600.0)  # until the slow listing has its list
    async with FakeLLMServer([held]) as llm, agent_for(llm, store, inbox=inbox) as agent:
        bot = new_bot(agent, settings_for(fake))
        connecting: asyncio.Task[None] | None = None
        try:
            await bot.login(fake.token)  # its setup, where the start-up recovery begins
            inbox.slow = True  # a list not taken yet is taken only once a delivery came meanwhile
            connecting = asyncio.create_task(bot.connect(reconnect=False))
            await fake.wait_ready()
            await fake.user_says(fake.user("lea"), "are you there?", mention_bot=True)
            await fake.wait_for("POST", rf"/channels/{fake.channel_id}/typing")  # claimed; its turn runs
            inbox.release.set()
            async with asyncio.timeout(10):
                await inbox.listed.wait()
            llm.unstall()
            await fake.wait_until(lambda: bool(fake.bot_messages(fake.channel_id)))
            async with asyncio.timeout(20):
                while busy := [t for t in bot.owned.tasks if t.get_name() not in LONG_LIVED]:
                    await asyncio.wait(busy)
            answers = [m["content"] for m in fake.bot_messages(fake.channel_id)]
            assert answers == ["Answered once."], f"the message was answered once, not {answers}"
        finally:
            await bot.close()
            if connecting is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    async with asyncio.timeout(10):
                        await connecting


async def test_tools_help_and_reset_answer_ephemerally(fake: FakeDiscord, store: SQLiteStore) -> None:
    async with (
        FakeLLMServer([reply("first"), reply("fresh start")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("max")
        await fake.slash(user, "tools")
        await fake.slash(user, "help")
        callbacks = await fake.wait_for("POST", CALLBACK, count=2)
        texts = [c.body()["data"]["content"] for c in callbacks]
        assert all(c.body()["data"]["flags"] & 64 for c in callbacks)
        assert any("get_environment_status" in t and "Air quality" in t for t in texts)
        assert any("/ask" in t for t in texts)

        await fake.user_dms(user, "remember apples")
        await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages")
        await fake.slash(user, "reset")
        await fake.wait_for("POST", r"/webhooks/\d+/[^/]+", count=1)
        await fake.user_dms(user, "what did I say?")
        await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages", count=2)
        assert "apples" not in json.dumps(llm.last_messages())


async def test_tools_shows_where_a_link_in_a_servers_description_goes(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    """A description's `[google.com](https://evil.example/d)` would show only "google.com"."""
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.hostile"], cwd=str(ROOT)
    )
    async with MCPHost({"hostile": server}, default_timeout=15.0) as host:
        async with asyncio.timeout(30):
            await host.wait_until_ready()
        async with (
            FakeLLMServer([]) as llm,
            agent_for(llm, store, host) as agent,
            running_bot(fake, agent),
        ):
            await fake.slash(fake.user("pia"), "tools")
            (callback,) = await fake.wait_for("POST", CALLBACK)
    content = callback.body()["data"]["content"]
    assert "find_page" in content
    assert "google.com (<https://evil.example/d>)" in content
    assert "[google.com](" not in content


async def test_without_the_content_intent_plain_channel_chatter_is_ignored(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("dm answer")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        assert not fake.identify_payloads[-1]["intents"] & (1 << 15)
        user = fake.user("ned")
        await fake.user_says(user, "just chatting")
        await fake.user_dms(user, "hi")
        await fake.wait_for("POST", CHANNEL_POST)
        assert len(llm.requests) == 1


async def test_the_whole_real_path_reaches_the_mcp_servers_and_shows_their_results(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    host = MCPHost(seed_servers(), default_timeout=15.0)
    await host.start()
    try:
        script = [
            tool_reply(("get_environment_status", '{"area_code": "A1001"}')),
            reply("Here is the air report."),
        ]
        async with (
            FakeLLMServer(script) as llm,
            agent_for(llm, store, host) as agent,
            running_bot(fake, agent),
        ):
            user = fake.user("olga")
            await fake.user_dms(user, "How is the air in A1001?")
            message = await final_answer(fake, within=30)
            assert "🔧 get_environment_status · env-query ✓" in message["content"]
            (custom_id,) = button_ids(message)
            await fake.click(user, message, custom_id)
            (callback,) = await fake.wait_for("POST", CALLBACK)
            (embed,) = callback.body()["data"]["embeds"]
            assert embed["fields"][0] == {"name": "Status", "value": "ok", "inline": True}
            assert "A1001" in embed["description"]
            tool_message = next(m for m in llm.last_messages() if m["role"] == "tool")
            assert "A1001" in tool_message["content"]
    finally:
        await host.aclose()


# --- start-up failures of `nerve discord`, as a user sees them --------------------------------------


async def run_nerve_discord(fake: FakeDiscord, tmp_path: Path, **env: str) -> tuple[int, str]:
    """`nerve discord` as a process against the fake; its exit code and stderr."""
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_", "DISCORD_"))}
    environ.update(
        {
            "NERVE_DB": str(tmp_path / "nerve.db"),
            "NERVE_MCP_CONFIG": str(config),
            "DISCORD_BOT_TOKEN": fake.token,
            "DISCORD_API_BASE_URL": fake.api_base_url,
            "DISCORD_GATEWAY_URL": fake.gateway_url,
            # /healthz, /readyz and /metrics on a free port of this machine only.
            "NERVE_HTTP_HOST": "127.0.0.1",
            "NERVE_HTTP_PORT": "0",
            **env,
        }
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "discord",
        env=environ,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(60):
            _, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, err.decode()


def assert_one_plain_line(code: int, err: str, *words: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("nerve: ")
    for word in words:
        assert word in err


async def test_nerve_discord_with_a_rejected_token_says_so_in_one_line(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    fake.reject_token = True
    code, err = await run_nerve_discord(fake, tmp_path)
    assert_one_plain_line(code, err, "DISCORD_BOT_TOKEN")


async def test_nerve_discord_with_discord_unreachable_says_so_in_one_line(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    port = unused_port()
    code, err = await run_nerve_discord(
        fake, tmp_path, DISCORD_API_BASE_URL=f"http://127.0.0.1:{port}/api/v10"
    )
    assert_one_plain_line(code, err, "Discord", f"127.0.0.1:{port}")


async def test_nerve_discord_with_disallowed_intents_says_so_in_one_line(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    run = asyncio.create_task(run_nerve_discord(fake, tmp_path, NERVE_DISCORD_MESSAGE_CONTENT="true"))
    # Discord closes the gateway with 4014 when the application may not use a privileged intent.
    await fake.wait_until(lambda: bool(fake.identify_payloads) or run.done(), within=60)
    await fake.disconnect(4014)
    code, err = await run
    assert_one_plain_line(code, err, "Message Content intent")

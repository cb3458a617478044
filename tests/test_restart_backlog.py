"""Events left unanswered by a restart: answered when `nerve slack` starts again, however many there
are, never told "busy" (their people already waited through the restart), each thread in its order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from adapters.discord.incoming import Job
from adapters.slack.events import inbox_payload
from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.turn.gate import BUSY_REPLY
from bot.types import ConversationKey
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, Reply, reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_discord_bot import FakeTools
from tests.test_slack_harness import mention, next_ts, rig, user_texts

CHANNEL = "C0CHANNEL"


def answer(request: dict[str, Any]) -> Reply:
    # Slow enough that every recovered turn is in flight or waiting while the first one runs.
    return reply(f"answer to {user_texts(request)[-1]}", delay=0.05)


async def test_more_left_over_events_than_slots_and_queue_are_all_answered_after_a_restart(
    tmp_path: Path,
) -> None:
    config = AgentConfig(max_concurrent_turns=1, turn_queue=1)
    async with rig(tmp_path, answer, config=config) as r:
        roots = [next_ts() for _ in range(5)]
        bodies = [mention(f"<@{BOT_USER_ID}> first in {n}", ts=root) for n, root in enumerate(roots)]
        # A second message in the first thread: answered after the first, never before it.
        bodies.append(mention(f"<@{BOT_USER_ID}> second in 0", thread_ts=roots[0]))
        for body in bodies:
            # Received and acknowledged by a process that stopped before answering any of them.
            assert await r.store.claim_event("slack", body["event_id"], inbox_payload(body))

        assert await r.bot.recover() == len(bodies)
        await r.settle(within=20)

        for n, root in enumerate(roots):
            texts = [p.text for p in r.slack.thread(CHANNEL, root)]
            assert BUSY_REPLY not in texts
            expected = [f"answer to first in {n}"] + (["answer to second in 0"] if n == 0 else [])
            assert [t for t in texts if t.startswith("answer to")] == expected, texts
        assert await r.store.unfinished_events("slack") == []


async def test_more_left_over_discord_messages_than_slots_and_queue_are_all_answered_after_a_restart(
    tmp_path: Path,
) -> None:
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    async with FakeDiscord() as fake, store, FakeLLMServer(answer) as llm_server:
        user = fake.user("lea")
        for n in range(4):
            message_id = fake.snowflake()
            key = ConversationKey(
                platform="discord",
                workspace=str(fake.guild_id),
                channel=str(fake.channel_id),
                thread=str(message_id),
            )
            job = Job(
                kind="message",
                key=key,
                text=f"question {n}",
                user_id=str(user.id),
                user_name="lea",
                event_id=f"m:{message_id}",
                channel_id=fake.channel_id,
                message_id=message_id,
                open_thread=False,
            )
            assert await store.claim_event("discord", job.event_id, job.to_json())
        llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
        config = AgentConfig(max_concurrent_turns=1, turn_queue=1)
        agent = Agent(llm=llm, host=FakeTools(), store=store, inbox=store, config=config)
        try:
            async with running_bot(fake, agent), asyncio.timeout(20):
                # Finished is a row in the store; nothing notifies the test of it.
                while await store.unfinished_events("discord"):  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
        finally:
            await llm.aclose()
        said = sorted(str(m.get("content") or "") for m in fake.bot_messages(fake.channel_id))
        assert said == [f"answer to question {n}" for n in range(4)]

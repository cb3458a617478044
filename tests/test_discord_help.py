"""Discord's `/help` says how to go on in nerve's threads as the settings in force make it true:
with NERVE_DISCORD_MESSAGE_CONTENT on, plain messages there are answered; off, Discord hands the
bot only the messages that mention it. Each case runs the real bot against the local fake Discord
and checks the behaviour the help describes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from adapters.discord.commands import IN_MY_THREADS_MENTIONS, IN_MY_THREADS_READING
from bot.store.sqlite import SQLiteStore
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.test_discord_bot import CALLBACK, THREADS, agent_for


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.mark.parametrize("reading", [True, False], ids=["message-content-on", "message-content-off"])
async def test_help_says_how_to_continue_in_my_threads_as_the_bot_behaves(
    fake: FakeDiscord, store: SQLiteStore, reading: bool
) -> None:
    script = [reply("Hello!"), reply("Plain message answered."), reply("Mention answered.")]
    async with (
        FakeLLMServer(script) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent, nerve_discord_message_content=reading),
    ):
        user = fake.user("ada")
        await fake.slash(user, "help")
        (callback,) = await fake.wait_for("POST", CALLBACK)
        text = callback.body()["data"]["content"]
        assert (IN_MY_THREADS_READING if reading else IN_MY_THREADS_MENTIONS) in text
        assert (IN_MY_THREADS_MENTIONS if reading else IN_MY_THREADS_READING) not in text

        mention = await fake.user_says(user, "hi there", mention_bot=True)
        await fake.wait_for("POST", THREADS)
        thread_id = int(mention["id"])
        await fake.user_says(user, "a plain message", channel_id=thread_id)
        await fake.user_says(user, "a mention", channel_id=thread_id, mention_bot=True)
        posts = await fake.wait_for("POST", f"/channels/{thread_id}/messages", count=2 if reading else 1)
        said = [post.body()["content"] for post in posts]
        seen = json.dumps(llm.last_messages())
        if reading:
            assert said == ["Plain message answered.", "Mention answered."]
            assert "a plain message" in seen
        else:
            assert said == ["Plain message answered."]  # the model's next reply, for the mention
            assert "a plain message" not in seen and "a mention" in seen

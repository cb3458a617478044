"""A person's data rights on Discord: /forget-me asks first, only to them (Cancel keeps everything),
its Delete button deletes only the asker's data, counted in the answer, and nobody else may press it
(also in a bot started anew); /export answers with one JSON file of the person's data, nothing of
anyone else's, in a server channel and in a DM alike.

Real discord.py against the fake Discord (gateway and REST), the real Agent on a real store (SQLite
and PostgreSQL), and the real `openai` client against the fake model service.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.common.rights import AUDIT_KEPT, NOT_YOURS, NOTHING_DELETED
from bot.agent import Agent
from bot.store.base import ConversationStore
from bot.types import ConversationKey
from tests.fakes.discord_api import FakeDiscord, FakeUser, running_bot
from tests.fakes.llm_server import reply
from tests.test_discord_approvals import buttons
from tests.test_discord_memory import answered, keep, memory_agent, person
from tests.test_thread_lock import until

pytestmark = pytest.mark.both_stores

ANYWHERE = ConversationKey(platform="discord", workspace="dm", channel="0", thread="0")


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def exported(agent: Agent, user: FakeUser) -> str:
    return json.dumps(await agent.export_person(ANYWHERE, str(user.id)))


async def both_said(fake: FakeDiscord, store: ConversationStore, ada: FakeUser, bob: FakeUser) -> None:
    """Ada and Bob each have a memory and told nerve something in a DM."""
    await keep(store, fake, "ada likes canaryada1", of=ada)
    await keep(store, fake, "bob likes canarybob1", of=bob)
    # Each turn over, its delivery recorded as answered (a restart would answer it again): a busy
    # machine shows a live message before the answer, and posts the answer before that record.
    for done, (user, text) in enumerate(((ada, "my code is canaryada2"), (bob, "my code is canarybob2")), 1):
        await fake.user_dms(user, text)
        await fake.wait_until(lambda done=done: answered_dms(fake) >= done, within=20)
        await until(lambda: no_unfinished(store), within=20)


def answered_dms(fake: FakeDiscord) -> int:
    """The DMs whose turn has the model's answer in a message of the bot's."""
    return len({m["channel_id"] for m in fake.bot_messages() if "noted" in str(m.get("content") or "")})


async def no_unfinished(store: ConversationStore) -> bool:
    return not await store.unfinished_events("discord")


async def press(fake: FakeDiscord, user: FakeUser, message: dict[str, Any], label: str) -> str:
    pressed = await fake.click(user, message, buttons(message)[label])
    return str((await answered(fake, pressed))["content"])


async def test_forget_me_asks_first_and_deletes_only_the_askers_data(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada, bob = fake.user("ada"), fake.user("bob")
    async with memory_agent(store, [reply("noted"), reply("noted")]) as agent, running_bot(fake, agent):
        await both_said(fake, store, ada, bob)

        question = await answered(fake, await fake.slash(ada, "forget-me", channel_id=fake.channel_id))
        assert "cannot be undone" in question["content"]
        assert set(buttons(question)) == {"Delete everything", "Cancel"}
        assert buttons(question)["Delete everything"] == f"nerve:rights:f:{ada.id}"

        assert await press(fake, ada, question, "Cancel") == NOTHING_DELETED
        assert "canaryada2" in await exported(agent, ada)

    # A new bot (a restart): the button's custom_id carries all a press needs.
    async with memory_agent(store, []) as agent, running_bot(fake, agent):
        assert await press(fake, bob, question, "Delete everything") == NOT_YOURS
        assert await store.memories_of(person=person(ada)) != []

        told = await press(fake, ada, question, "Delete everything")
        assert "1 memory about you deleted" in told and "1 private conversation deleted" in told
        assert AUDIT_KEPT in told
        assert await store.memories_of(person=person(ada)) == []
        assert "canaryada" not in await exported(agent, ada)
        bobs = await exported(agent, bob)
        assert "canarybob1" in bobs and "canarybob2" in bobs, "Bob's memory and messages stay"


async def test_export_attaches_the_persons_json_in_a_server_and_in_a_dm(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada, bob = fake.user("ada"), fake.user("bob")
    async with memory_agent(store, [reply("noted"), reply("noted")]) as agent, running_bot(fake, agent):
        await both_said(fake, store, ada, bob)

        for channel in (fake.channel_id, None):
            asked = await fake.slash(ada, "export", channel_id=channel)
            token = re.escape(asked["token"])
            [sent] = await fake.wait_for("POST", rf"/webhooks/\d+/{token}")
            assert sent.body()["flags"] & 64, "only the person sees it"
            [file] = [p for p in sent.parts if p.filename]
            assert file.filename == "nerve-export.json"
            document = json.loads(file.data)
            assert [m["text"] for m in document["memories"]] == ["ada likes canaryada1"]
            assert "canaryada2" in file.text and "canarybob" not in file.text

"""Files shared on Discord reach the core: a message's attachments (mentions, DMs) and `/ask`'s `file`
option become `Incoming.files`, whose fetch downloads them with discord.py's `Attachment.read()` from
the fake Discord's CDN. Real discord.py against the fake Discord, the real Agent and store, the real
`openai` client against the fake model service."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import discord
import pytest
from PIL import Image

from adapters.discord.incoming import Job, dm_key, job_for, thread_key
from bot.agent import Agent
from bot.errors import FileRefused, FileTooBig, FileUnreadable
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import AgentReply, Incoming, Progress, no_progress
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, image_parts, reply
from tests.test_discord_bot import FakeTools, agent_for

MB = 1024 * 1024
LIMIT = 20 * MB
THREADS = r"/channels/\d+/messages/\d+/threads"


def png(width: int = 64, height: int = 48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, format="PNG")
    return out.getvalue()


CSV = b"city,aqi\nParis,42\nLyon,37\n"


@dataclass
class Fetched:
    """A turn's files as the agent was handed them, each fetched (with the core's limit) during the turn."""

    incoming: Incoming
    results: dict[str, bytes | FileRefused] = field(default_factory=dict)


class FetchingAgent(Agent):
    """The real Agent, fetching each shared file as its intake would, then answering the text alone
    (so each file is downloaded once, here: the core's reading has its own tests, and the last test
    below goes through it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turns: list[Fetched] = []
        self.fetched = asyncio.Event()

    async def reply(self, incoming: Incoming, progress: Progress = no_progress) -> AgentReply:
        seen = Fetched(incoming)
        for shared in incoming.files:
            try:
                seen.results[shared.name] = await shared.fetch(LIMIT)
            except FileRefused as exc:
                seen.results[shared.name] = exc
        self.turns.append(seen)
        self.fetched.set()
        return await super().reply(replace(incoming, files=()), progress)

    async def turn(self, within: float = 10.0) -> Fetched:
        async with asyncio.timeout(within):
            await self.fetched.wait()
        return self.turns[-1]


@contextlib.asynccontextmanager
async def fetching_agent(llm_server: FakeLLMServer, store: SQLiteStore) -> AsyncIterator[FetchingAgent]:
    llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
    try:
        yield FetchingAgent(llm=llm, host=FakeTools(), store=store, inbox=store)
    finally:
        await llm.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_mention_with_an_image_hands_the_agent_the_file_read_through_discord(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    image = png()
    async with (
        FakeLLMServer([reply("A red rectangle.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        shot = fake.attachment("screenshot.png", image, content_type="image/png")
        mention = await fake.user_says(
            fake.user("ada"), "what is in this screenshot?", mention_bot=True, attachments=[shot]
        )
        seen = await agent.turn()
        assert seen.incoming.text == "what is in this screenshot?"
        (shared,) = seen.incoming.files
        assert (shared.name, shared.size, shared.mime, shared.ref) == (
            "screenshot.png",
            len(image),
            "image/png",
            shot["id"],
        )
        assert seen.results["screenshot.png"] == image
        assert [p.split("/")[-1] for p in fake.downloads] == ["screenshot.png"], "downloaded from its URL"
        (posted,) = await fake.wait_for("POST", f"/channels/{fake.channel_id}/messages")
        assert int(posted.body()["message_reference"]["message_id"]) == int(mention["id"])
        (thread,) = await fake.wait_for("POST", THREADS)
        assert thread.body()["name"] == "what is in this screenshot?"


async def test_a_dm_with_only_a_csv_is_a_turn_about_it(fake: FakeDiscord, store: SQLiteStore) -> None:
    async with (
        FakeLLMServer([reply("Paris has the higher AQI.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("bea")
        dm = fake.dm_channel(user)
        table = fake.attachment("air.csv", CSV, content_type="text/csv; charset=utf-8", channel_id=dm)
        await fake.user_dms(user, "", attachments=[table])
        seen = await agent.turn()
        assert seen.incoming.text == ""
        assert seen.incoming.key.workspace == "dm"
        assert [(f.name, f.mime) for f in seen.incoming.files] == [("air.csv", "text/csv; charset=utf-8")]
        assert seen.results["air.csv"] == CSV
        (posted,) = await fake.wait_for("POST", f"/channels/{dm}/messages")
        assert "Paris has the higher AQI." in posted.body()["content"]
        assert not fake.find("POST", THREADS), "DMs never open threads"


async def test_ask_with_a_file_option_hands_the_agent_the_resolved_attachment(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    image = png(32, 32)
    async with (
        FakeLLMServer([reply("A small red square.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        (ask,) = [c for c in fake.commands if c["name"] == "ask"]
        assert [(o["name"], o["type"], o.get("required", False)) for o in ask["options"]] == [
            ("question", 3, True),
            ("file", 11, False),
        ], "an optional option of type attachment"
        square = fake.attachment("square.png", image, content_type="image/png")
        await fake.slash(
            fake.user("cy"),
            "ask",
            {"question": "what colour is it?"},
            channel_id=fake.channel_id,
            files={"file": square},
        )
        seen = await agent.turn()
        assert seen.incoming.text == "what colour is it?"
        assert [(f.name, f.size, f.ref) for f in seen.incoming.files] == [
            ("square.png", len(image), square["id"])
        ]
        assert seen.results["square.png"] == image
        await fake.wait_for("POST", THREADS)


async def test_ask_without_a_file_hands_the_agent_none(fake: FakeDiscord, store: SQLiteStore) -> None:
    async with (
        FakeLLMServer([reply("Hello.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        await fake.slash(fake.user("cy"), "ask", {"question": "hi"})
        seen = await agent.turn()
        assert seen.incoming.files == ()
        assert not fake.downloads


async def test_a_file_over_the_limit_is_refused_without_a_download(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("I could not read it.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("dee")
        dm = fake.dm_channel(user)
        big = fake.attachment("dump.log", b"x" * (30 * MB), content_type="text/plain", channel_id=dm)
        await fake.user_dms(user, "what went wrong?", attachments=[big])
        seen = await agent.turn()
        refused = seen.results["dump.log"]
        assert isinstance(refused, FileTooBig)
        assert str(refused) == "dump.log is 30 MB, over the limit of 20 MB per file."
        await fake.wait_for("POST", f"/channels/{dm}/messages")
        assert not fake.downloads, "its stated size was enough: nothing was downloaded"


async def test_a_file_gone_from_the_cdn_is_unreadable(fake: FakeDiscord, store: SQLiteStore) -> None:
    async with (
        FakeLLMServer([reply("It is gone.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("eve")
        gone = fake.attachment("notes.md", b"# notes\n", content_type="text/markdown", served=False)
        await fake.user_says(user, "summarise this", mention_bot=True, attachments=[gone])
        seen = await agent.turn()
        refused = seen.results["notes.md"]
        assert isinstance(refused, FileUnreadable)
        assert "notes.md" in str(refused)
        assert len(fake.downloads) == 1, "the download was tried, through discord.py"
        await fake.wait_for("POST", f"/channels/{fake.channel_id}/messages")


async def test_channel_chatter_with_a_file_is_not_a_turn_without_the_content_intent(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    """Discord blanks the attachments of a message that does not mention a bot without the intent."""
    async with (
        FakeLLMServer([reply("Hello!")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("fay")
        await fake.user_says(user, "", attachments=[fake.attachment("cat.png", png())])
        await fake.user_says(user, "hello", mention_bot=True)
        seen = await agent.turn()
        assert seen.incoming.text == "hello" and len(agent.turns) == 1
        assert not fake.downloads


def test_a_kept_delivery_keeps_its_files_and_reads_them_on_the_client_answering_it() -> None:
    """A delivery answered after a restart (or by another process) downloads its files from what it kept."""
    fake = FakeDiscord()
    state: Any = type("State", (), {"http": object()})()
    payload = fake.attachment("air.csv", CSV, content_type="text/csv")
    attachment = discord.Attachment(data=payload, state=state)
    key = thread_key(1, 2, 3)
    incoming = Incoming(key=key, text="", user_id="9", event_id="m:3")
    job = Job.from_json(
        job_for(incoming, kind="message", channel_id=2, message_id=3, attachments=[attachment]).to_json()
    )
    assert job.thread_name == "air.csv"
    assert job.incoming.files == (), "without a client there is nothing to download with"
    (shared,) = job.incoming_on(state).files
    assert (shared.name, shared.size, shared.mime, shared.ref) == (
        "air.csv",
        len(CSV),
        "text/csv",
        payload["id"],
    )


async def test_a_file_shared_in_my_thread_without_a_mention_is_read_with_the_content_intent(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    async with (
        FakeLLMServer([reply("Hello!"), reply("It lists two cities.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent, nerve_discord_message_content=True),
    ):
        user = fake.user("gus")
        mention = await fake.user_says(user, "hi", mention_bot=True)
        await fake.wait_for("POST", THREADS)
        thread_id = int(mention["id"])
        agent.fetched.clear()
        table = fake.attachment("air.csv", CSV, content_type="text/csv", channel_id=thread_id)
        await fake.user_says(user, "", channel_id=thread_id, attachments=[table])
        seen = await agent.turn()
        assert seen.incoming.key == agent.turns[0].incoming.key, "the thread's conversation goes on"
        assert seen.results["air.csv"] == CSV
        await fake.wait_for("POST", f"/channels/{thread_id}/messages")


async def test_a_delivery_kept_over_a_restart_downloads_its_files_when_answered(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    user = fake.user("hal")
    dm = fake.dm_channel(user)
    message_id = fake.snowflake()
    table = fake.attachment("air.csv", CSV, content_type="text/csv", channel_id=dm)
    job = Job(
        kind="message",
        key=dm_key(dm, user.id),
        text="which city is cleaner?",
        user_id=str(user.id),
        user_name="hal",
        event_id=f"m:{message_id}",
        channel_id=dm,
        message_id=message_id,
        open_thread=False,
        files=(table,),
    )
    assert await store.claim_event("discord", job.event_id, job.to_json())
    async with (
        FakeLLMServer([reply("Lyon.")]) as llm,
        fetching_agent(llm, store) as agent,
        running_bot(fake, agent),
    ):
        seen = await agent.turn()
        assert seen.incoming.replayed
        assert [f.name for f in seen.incoming.files] == ["air.csv"]
        assert seen.results["air.csv"] == CSV
        await fake.wait_for("POST", f"/channels/{dm}/messages")


async def test_a_dm_with_a_png_reaches_the_model_as_an_image_and_its_answer_is_posted(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    """End to end: Discord's CDN, discord.py's read, the core's intake and the model's request."""
    image = png(800, 600)
    async with (
        FakeLLMServer([reply("A red rectangle, 800 by 600.")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("ida")
        dm = fake.dm_channel(user)
        shot = fake.attachment("shot.png", image, content_type="image/png", channel_id=dm)
        await fake.user_dms(user, "what is this?", attachments=[shot])
        answer = "A red rectangle, 800 by 600."
        await fake.wait_until(lambda: any(answer in m["content"] for m in fake.bot_messages(dm)))
        (request,) = llm.requests
        (part,) = image_parts(request)
        url = part["image_url"]["url"]
        assert url.startswith("data:image/")
        shown = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert shown.size == (800, 600), "small enough to be sent as it is"
        assert "shot.png" in json.dumps(request["messages"])
        assert [p.split("/")[-1] for p in fake.downloads] == ["shot.png"]


async def test_a_file_over_the_limit_in_a_dm_is_named_in_the_reply_and_never_downloaded(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    """End to end: the core's limit, Discord's stated size, no download, a plain reply."""
    async with (
        FakeLLMServer([reply("I could only read your question.")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent),
    ):
        user = fake.user("jo")
        dm = fake.dm_channel(user)
        big = fake.attachment("dump.log", b"x" * (30 * MB), content_type="text/plain", channel_id=dm)
        await fake.user_dms(user, "what went wrong?", attachments=[big])
        answer = "I could only read your question."
        await fake.wait_until(lambda: any(answer in m["content"] for m in fake.bot_messages(dm)))
        (final,) = fake.bot_messages(dm)
        assert "dump.log" in final["content"] and "NERVE_MAX_FILE_MB" in final["content"]
        assert final["content"].index("dump.log") < final["content"].index(answer), "the notice first"
        assert not fake.downloads

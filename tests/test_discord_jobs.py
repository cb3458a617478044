"""Discord turns as jobs on PostgreSQL: any `nerve discord` process's worker answers what the process
owning the gateway shard received (`adapters.discord.client`).

Real discord.py against the local fake Discord, the real Agent and PostgresStore on a schema of its
own at NERVE_TEST_DATABASE_URL, the real job queue (procrastinate) and the real `openai` client
against the fake model service. Each "process" is a Discord client with its own store, agent and
jobs on the shared schema, as separate processes would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.discord.app import NerveDiscordBot, new_bot, run_discord
from adapters.discord.client import CurrentClient
from adapters.discord.incoming import thread_key
from adapters.jobs_runtime import drained, work
from adapters.settings import Settings
from bot.agent import Agent
from bot.jobs import TurnJobs, open_turn_jobs
from bot.mcp.host import MCPHost
from bot.store.base import ConversationStore
from tests.fakes.discord_api import FakeDiscord, settings_for
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.stores import PostgresBackend, postgres_backend
from tests.test_discord_approvals import (
    approval_in,
    approving_agent,
    click,
    host,
    notes,
    ran,
    read_and_append,
)
from tests.test_discord_bot import CALLBACK, CHANNEL_POST, ORIGINAL, agent_for
from tests.test_discord_schedules import a_schedule as scheduled
from tests.test_discord_schedules import has, posts_in
from tests.test_thread_lock import until

STALL = 2.0
__all__ = ["host", "notes"]  # fixtures of the approval tests, used here too


@pytest.fixture
async def pg() -> AsyncIterator[PostgresBackend]:
    async with postgres_backend() as backend:
        yield backend


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@dataclass
class Process:
    """One `nerve discord` process's parts: its client, jobs, store and agent."""

    bot: NerveDiscordBot
    jobs: TurnJobs
    store: ConversationStore
    agent: Agent


def the_guilds_shard(fake: FakeDiscord) -> int:
    """The shard of two that Discord sends the fake guild's events to."""
    return (fake.guild_id >> 22) % 2


def ready_gateways(fake: FakeDiscord) -> int:
    return sum(1 for gateway in fake._gateways if gateway.ready)


@contextlib.asynccontextmanager
async def connected(fake: FakeDiscord, bot: NerveDiscordBot) -> AsyncIterator[NerveDiscordBot]:
    """`bot` logged in and past READY on the fake's gateway; closed on exit."""
    connected_before = ready_gateways(fake)
    started = asyncio.create_task(bot.start(fake.token), name="discord-bot")
    try:
        await fake.wait_until(lambda: ready_gateways(fake) > connected_before or started.done())
        if started.done():
            started.result()
            raise AssertionError("the bot stopped before it connected")
        yield bot
    finally:
        await bot.close()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            async with asyncio.timeout(10):
                await started


async def worker_taking_jobs(jobs: TurnJobs) -> None:
    async with asyncio.timeout(10):
        while not jobs.worker_alive():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def process_settings(fake: FakeDiscord, pg: PostgresBackend, shard: int | None = None) -> Settings:
    overrides: dict[str, Any] = {"nerve_database_url": pg.location, "nerve_worker_stall_timeout": STALL}
    if shard is not None:
        overrides.update(nerve_discord_shard_count=2, nerve_discord_shards=str(shard))
    return settings_for(fake, **overrides)


@contextlib.asynccontextmanager
async def discord_process(
    fake: FakeDiscord,
    pg: PostgresBackend,
    llm: FakeLLMServer,
    *,
    worker: bool,
    shard: int | None = None,
    grace: float = 5.0,
    host: MCPHost | None = None,
) -> AsyncIterator[Process]:
    """A Discord client on the shared schema, connected to the fake's gateway (on `shard` of two if
    given), running a worker for Discord's jobs if `worker`; drained within `grace` on exit. With
    `host`, its agent asks for approvals of the host's writes."""
    settings = process_settings(fake, pg, shard)
    store = await pg.open()
    jobs = await open_turn_jobs(pg.location, stall_timeout=STALL)
    clients = CurrentClient()
    try:
        made = agent_for(llm, store) if host is None else approving_agent(llm, store, host)  # type: ignore[arg-type]
        async with made as agent:
            bot = new_bot(agent, settings, jobs=jobs, clients=clients)
            if worker:
                work(jobs, clients, settings)
            async with connected(fake, bot):
                try:
                    if worker:
                        await worker_taking_jobs(jobs)
                    yield Process(bot=bot, jobs=jobs, store=store, agent=agent)
                finally:
                    await drained(bot, jobs, grace)
    finally:
        await jobs.aclose()
        await store.close()


async def discord_jobs(pg: PostgresBackend) -> list[tuple[str, str, str]]:
    """Discord's jobs in the queue now: (queueing lock, status, queue)."""
    rows = await pg.rows(
        "SELECT queueing_lock, status, queue_name FROM procrastinate_jobs"
        " WHERE queue_name LIKE ? ORDER BY id",
        ("%-discord",),
    )
    return [(str(lock), str(status), str(queue)) for lock, status, queue in rows]


async def until_answered(pg: PostgresBackend, event_id: str, within: float = 20.0) -> None:
    """Once the delivery is recorded in the inbox and marked answered."""
    query = "SELECT status FROM inbox WHERE platform = 'discord' AND event_id = ?"
    async with asyncio.timeout(within):
        while await pg.rows(query, (event_id,)) != [("done",)]:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def reasons(http: aiohttp.ClientSession, ops_url: str) -> list[str]:
    """Why `/readyz` says the process is not ready."""
    async with http.get(f"{ops_url}/readyz") as response:
        return list((await response.json())["reasons"])


def channel_posts(fake: FakeDiscord, channel_id: int) -> list[dict[str, Any]]:
    return [r.body() for r in fake.find("POST", CHANNEL_POST) if r.path == f"/channels/{channel_id}/messages"]


# --- nerve discord on PostgreSQL ---------------------------------------------------------------------


async def test_nerve_discord_on_postgresql_answers_a_mention_and_an_ask_through_its_worker(
    fake: FakeDiscord, pg: PostgresBackend
) -> None:
    script = [reply("The air is fine.", delay=1.0), reply("Paris.", delay=1.0)]
    store = await pg.open()
    stop = asyncio.Event()
    ops: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    settings = settings_for(fake, nerve_database_url=pg.location, nerve_worker_stall_timeout=STALL)
    try:
        async with (
            FakeLLMServer(script) as llm,
            agent_for(llm, store) as agent,
            aiohttp.ClientSession() as http,
        ):
            running = asyncio.create_task(run_discord(agent, settings, ops_ready=ops, stop=stop))
            try:
                await fake.wait_ready()
                # Connected, and the worker takes jobs: ready (the test configures no MCP server).
                async with asyncio.timeout(20):
                    while await reasons(http, await ops) != []:  # noqa: ASYNC110
                        await asyncio.sleep(0.05)

                ada = fake.user("ada")
                mention = await fake.user_says(ada, "how is the air?", mention_bot=True)
                await fake.wait_until(lambda: len(llm.requests) == 1)
                # While the model works, the turn is a job of Discord's queue, running.
                assert [(lock, status) for lock, status, _ in await discord_jobs(pg)] == [
                    (f"discord:m:{mention['id']}", "doing")
                ]
                await until_answered(pg, f"m:{mention['id']}")
                (answer,) = channel_posts(fake, fake.channel_id)
                assert int(answer["message_reference"]["message_id"]) == int(mention["id"])
                assert [m["content"] for m in fake.bot_messages(fake.channel_id)] == ["The air is fine."]

                # /ask: received here and taken by this process's worker: answered through its token.
                interaction = await fake.slash(
                    ada, "ask", {"question": "Capital of France?"}, channel_id=fake.channel_id
                )
                await until_answered(pg, f"i:{interaction['id']}")
                edits = [r.body() for r in fake.find("PATCH", ORIGINAL)]
                assert edits and edits[-1]["content"] == "Paris."
                assert len(channel_posts(fake, fake.channel_id)) == 1, "the /ask answer is no channel message"
            finally:
                stop.set()
                async with asyncio.timeout(15):
                    await running
        llm.assert_complete()
        assert await discord_jobs(pg) == []
    finally:
        await store.close()


# --- several processes ---------------------------------------------------------------------------


async def test_the_process_owning_the_shard_queues_and_another_process_worker_answers_once(
    fake: FakeDiscord, pg: PostgresBackend
) -> None:
    owner_shard = the_guilds_shard(fake)
    async with (
        FakeLLMServer([]) as owner_llm,
        FakeLLMServer([reply("Answered elsewhere."), reply("Asked and answered elsewhere.")]) as worker_llm,
        discord_process(fake, pg, worker_llm, worker=True, shard=1 - owner_shard),
        discord_process(fake, pg, owner_llm, worker=False, shard=owner_shard),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "where is this answered?", mention_bot=True)
        await until_answered(pg, f"m:{mention['id']}")

        # /ask: its token is held by the owner, which runs no worker: answered as a channel message
        # replying to the "thinking…" message, as after a restart.
        interaction = await fake.slash(ada, "ask", {"question": "and this?"}, channel_id=fake.channel_id)
        (defer,) = await fake.wait_for("POST", CALLBACK)
        await until_answered(pg, f"i:{interaction['id']}")
        await asyncio.sleep(0.5)  # room for a second answer, were there one

        posts = channel_posts(fake, fake.channel_id)
        assert [p["content"] for p in posts] == ["Answered elsewhere.", "Asked and answered elsewhere."]
        assert int(posts[0]["message_reference"]["message_id"]) == int(mention["id"])
        thinking = fake._interactions[interaction["token"]]["original"]
        assert int(posts[1]["message_reference"]["message_id"]) == thinking
        assert owner_llm.requests == [], "the owner of the shard runs no worker"
        worker_llm.assert_complete()
        assert defer.json["type"] == 5


async def test_a_redelivered_message_queues_nothing(
    fake: FakeDiscord, pg: PostgresBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="adapters.discord.client")
    async with (
        FakeLLMServer([reply("Once.")]) as llm,
        discord_process(fake, pg, llm, worker=False),
    ):
        ada = fake.user("ada")
        first = await fake.user_says(ada, "say it once", mention_bot=True)
        async with asyncio.timeout(10):
            while not await discord_jobs(pg):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await fake.user_says(ada, "say it once", mention_bot=True, message_id=int(first["id"]))
        async with asyncio.timeout(10):
            while "ignoring re-delivered message" not in caplog.text:  # noqa: ASYNC110
                await asyncio.sleep(0.02)

        assert [(lock, status) for lock, status, _ in await discord_jobs(pg)] == [
            (f"discord:m:{first['id']}", "todo")
        ]
        async with discord_process(fake, pg, llm, worker=True, shard=None):
            await until_answered(pg, f"m:{first['id']}")
        assert [p["content"] for p in channel_posts(fake, fake.channel_id)] == ["Once."]
        llm.assert_complete()


async def test_a_job_cut_off_mid_answer_goes_on_in_the_same_message_in_the_next_process(
    fake: FakeDiscord, pg: PostgresBackend
) -> None:
    words = "The first words of a long answer, and then more words"
    script = [
        # Streams its first words, then nothing: the process drains before the answer is done.
        reply(words, chunk_chars=8, stall_after=4, stall=60),
        reply("The whole answer."),
    ]
    async with FakeLLMServer(script) as llm:
        async with discord_process(fake, pg, llm, worker=True, grace=0.0):
            ada = fake.user("ada")
            mention = await fake.user_says(ada, "tell me at length", mention_bot=True)
            (live,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        # Drained with no grace: the job went back to the queue, its live message stays.
        assert [(lock, status) for lock, status, _ in await discord_jobs(pg)] == [
            (f"discord:m:{mention['id']}", "todo")
        ]
        live_id = int(fake.bot_messages(fake.channel_id)[0]["id"])

        async with discord_process(fake, pg, llm, worker=True):
            await until_answered(pg, f"m:{mention['id']}")

        assert len(channel_posts(fake, fake.channel_id)) == 1, "the answer went on in the live message"
        (message,) = fake.bot_messages(fake.channel_id)
        assert int(message["id"]) == live_id
        assert message["content"] == "The whole answer."
        assert any(
            r.body().get("content") == "The whole answer."
            for r in fake.find("PATCH", rf"/channels/{fake.channel_id}/messages/{live_id}")
        )
        assert live.body()["content"]
        llm.assert_complete()


async def test_a_turn_parked_on_an_approval_goes_on_as_a_job_of_another_process_after_the_click(
    fake: FakeDiscord, pg: PostgresBackend, host: MCPHost, notes: Path
) -> None:
    owner_shard = the_guilds_shard(fake)
    async with (
        FakeLLMServer([]) as owner_llm,
        FakeLLMServer([read_and_append(), reply("Added your line.")]) as worker_llm,
        discord_process(fake, pg, worker_llm, worker=True, shard=1 - owner_shard, host=host),
        discord_process(fake, pg, owner_llm, worker=False, shard=owner_shard, host=host),
    ):
        ada = fake.user("ada")
        mention = await fake.user_says(ada, "add hi to the note", mention_bot=True)
        approval = await approval_in(fake, fake.channel_id)
        await until_answered(pg, f"m:{mention['id']}")
        assert ran(notes) == ["read_note"]

        # The click reaches the owner of the shard, which decides; the turn goes on as a job.
        await click(fake, ada, approval, "Approve")
        thread = int(mention["id"])
        (answer,) = await fake.wait_for("POST", rf"/channels/{thread}/messages", within=20)
        await asyncio.sleep(0.5)  # room for a second answer, were there one

        assert answer.body()["content"].startswith("Added your line.")
        assert len(fake.find("POST", rf"/channels/{thread}/messages")) == 1
        assert ran(notes) == ["read_note", "append_note"]
        assert owner_llm.requests == []
        worker_llm.assert_complete()


async def test_a_client_that_closes_mid_job_hands_it_back_and_the_processs_next_client_answers_it(
    fake: FakeDiscord, pg: PostgresBackend
) -> None:
    words = "The first words of a long answer, and then more words"
    script = [reply(words, chunk_chars=8, stall_after=4, stall=60), reply("The whole answer.")]
    settings = process_settings(fake, pg)
    store = await pg.open()
    jobs = await open_turn_jobs(pg.location, stall_timeout=STALL)
    clients = CurrentClient()
    try:
        async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent:  # type: ignore[arg-type]
            work(jobs, clients, settings)
            async with connected(fake, new_bot(agent, settings, jobs=jobs, clients=clients)):
                await worker_taking_jobs(jobs)
                mention = await fake.user_says(fake.user("ada"), "tell me at length", mention_bot=True)
                await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
            # The gateway's client died mid-answer (run_discord makes a new one): the job is back
            # in the queue, and this process's worker takes it again on the next client.
            async with connected(fake, new_bot(agent, settings, jobs=jobs, clients=clients)) as second:
                await until_answered(pg, f"m:{mention['id']}")
                await drained(second, jobs, 5.0)
            (message,) = fake.bot_messages(fake.channel_id)
            assert message["content"] == "The whole answer."
            assert len(channel_posts(fake, fake.channel_id)) == 1
            llm.assert_complete()
    finally:
        await jobs.aclose()
        await store.close()


# --- schedules -------------------------------------------------------------------------------------


async def test_a_due_discord_schedule_on_postgresql_is_one_job_answered_once_in_its_thread(
    fake: FakeDiscord, pg: PostgresBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.schedules.runner")
    ada = fake.user("ada")
    made_in = thread_key(fake.guild_id, fake.channel_id, fake.snowflake())
    due = scheduled(made_in, ada, "remind us to stretch", float(int(time.time())) - 30)
    async with FakeLLMServer([reply("Time to stretch.")]) as llm:
        async with discord_process(fake, pg, llm, worker=True) as first:
            await first.store.add_schedule(due)
            first.agent.wake_schedules()
            await fake.wait_until(
                lambda: any(has(fake, int(t), "Time to stretch.") for t in fake.channels), within=30
            )

            async def answered() -> bool:
                return [r.status for r in await first.store.runs_of(due.id)] == ["answered"]

            await until(answered, 30)
        assert len(posts_in(fake, fake.channel_id)) == 1, "one announcement"
        assert len(llm.requests) == 1
    assert f"schedule {due.id}: the slot at {due.first_at} is queued" in caplog.text

"""Discord's work as jobs that every `nerve discord` process on one PostgreSQL database shares.

With NERVE_DATABASE_URL set, the process whose gateway shard receives a message or a slash command
records it in the inbox (as always: nothing a person writes is lost) and queues a `discord.event`
job before it returns; the worker of whichever `nerve discord` process is free answers it. A parked
turn goes on as a `discord.resume` job, and the messages that waited behind it as a
`discord.deferred` job (`adapters.jobs_runtime`). One conversation's jobs run one at a time, in the
order they were queued, in any process.

An interaction (`/ask`, `/prompt`) can be answered through its token only by the process that
received it, within Discord's 15 minutes: that process keeps it (`HeldInteractions`) and answers
natively when its own worker takes the job. Any other process answers it as a restart does: as
channel messages replying to the "thinking…" message, which stays as it was.

The worker and its handlers live as long as the process, the Discord client does not: it is made
anew after a connection dies. `CurrentClient` hands each job to the client logged in now, waiting
for the next one while a restart is under way, and a client that closes cuts off the jobs it was
running, which go back to the queue (`NerveDiscordBot.run_job`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import discord

from adapters import jobs_runtime
from adapters.common.tasks import Spawn
from bot.jobs import JobHandler
from bot.types import ConversationKey

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

PLATFORM = "discord"
# Discord lets an interaction's token answer for 15 minutes; a little less, to finish within it.
INTERACTION_SECONDS = 14 * 60


class Launcher(jobs_runtime.Launcher):
    """Where Discord work runs: as a job any process takes (PostgreSQL), or a task here (SQLite)."""

    def __init__(self, jobs: TurnJobs | None, spawn: Spawn) -> None:
        super().__init__(jobs, spawn, PLATFORM)


class JobClient(Protocol):
    """What a Discord client does for its process's worker (`NerveDiscordBot`)."""

    async def answer_event(self, event_id: str) -> None: ...

    async def go_on(self, request_id: str) -> None: ...

    async def answer_deferred(self, key: ConversationKey) -> None: ...

    async def run_job(self, job: Coroutine[Any, Any, None], name: str) -> None: ...


class CurrentClient:
    """The Discord client of this process that its worker's jobs run on: the newest logged in."""

    def __init__(self) -> None:
        self._client: JobClient | None = None
        self._here = asyncio.Event()

    def use(self, client: JobClient) -> None:
        """`client` is logged in: jobs run on it from now on."""
        self._client = client
        self._here.set()

    def drop(self, client: JobClient) -> None:
        """`client` is closing: jobs wait for the next one."""
        if self._client is client:
            self._client = None
            self._here.clear()

    async def client(self) -> JobClient:
        """The client logged in now, once there is one."""
        while True:
            await self._here.wait()
            if self._client is not None:
                return self._client

    def job_handlers(self) -> dict[str, JobHandler]:
        """The handlers of Discord's jobs, each run on the current client."""

        async def on_client(work: Callable[[JobClient], Coroutine[Any, Any, None]], name: str) -> None:
            client = await self.client()
            await client.run_job(work(client), name)

        async def answer_event(event_id: str) -> None:
            await on_client(lambda c: c.answer_event(event_id), f"discord-job-{event_id}")

        async def go_on(request_id: str) -> None:
            await on_client(lambda c: c.go_on(request_id), f"discord-resume-{request_id}")

        async def answer_deferred(key: ConversationKey) -> None:
            await on_client(lambda c: c.answer_deferred(key), f"discord-deferred-{key}")

        return jobs_runtime.job_handlers(PLATFORM, answer_event, go_on, answer_deferred)


class HeldInteractions:
    """The interactions this client received whose answer may still go through their token."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[discord.Interaction[Any], float]] = {}

    def hold(self, event_id: str, interaction: discord.Interaction[Any]) -> None:
        now = time.monotonic()
        self._held = {e: held for e, held in self._held.items() if held[1] > now}
        self._held[event_id] = (interaction, now + INTERACTION_SECONDS)

    def take(self, event_id: str) -> discord.Interaction[Any] | None:
        """The interaction of `event_id` if this client holds it and its token still answers."""
        held = self._held.pop(event_id, None)
        if held is None or held[1] <= time.monotonic() or held[0].is_expired():
            return None
        return held[0]

"""The Discord client of nerve: what arrives (messages, `/ask`, clicks) and how it is kept.

Exactly-once: every delivery is claimed in the agent's inbox (re-deliveries are dropped) and marked
finished once answered; at start-up, deliveries a crash left are answered as channel messages. With
NERVE_DATABASE_URL, turns are jobs (`adapters.jobs_runtime`) on whichever process's worker is free;
an interaction's token answers only in the process that received it (`HeldInteractions`), and
`CurrentClient` hands each job to the client logged in now.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from adapters import jobs_runtime
from adapters.common.intake import Recorded, sweep, sweep_forever
from adapters.common.tasks import Owned
from adapters.discord import commands as discord_commands
from adapters.discord.answering import TurnAnswers
from adapters.discord.approvals import ApprovalButton, ApprovalFlow
from adapters.discord.delivery import (
    NO_MENTIONS,
    ChannelGuard,
    ConversationOrder,
    ToolResultsButton,
    response_id,
)
from adapters.discord.incoming import PLATFORM, Job, job_for, to_incoming
from adapters.discord.input_flow import InputFlow
from adapters.discord.input_message import InputButton
from adapters.discord.live import EDIT_EVERY
from adapters.discord.memory import MemoryButton, MemoryFlow
from adapters.discord.memory import register as register_memory
from adapters.discord.render import ResultsCache
from adapters.discord.rights import RightsButton, RightsFlow
from adapters.discord.rights import register as register_rights
from adapters.discord.schedules import SCHEDULES_TASK, DiscordSchedules
from adapters.discord.schedules import register as register_schedules
from adapters.discord.settings import DiscordSettings
from adapters.discord.sign_in import DisconnectButton, SignInLinks, TurnLinks
from adapters.discord.sign_in import register as register_sign_in
from adapters.discord.usage import register as register_usage
from adapters.jobs_runtime import Launcher
from adapters.up_line import log_up
from bot.agent import Agent, PostRecords
from bot.jobs import JobHandler
from bot.types import no_progress

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

OFFICIAL_GATEWAY = "wss://gateway.discord.gg/"
NEED_QUESTION = "Please give me a question, e.g. `/ask question: what is the air quality in 94107?`"


def point_discord_at(settings: DiscordSettings) -> None:
    """Aim discord.py's REST and gateway at the configured endpoints (process-wide class attributes)."""
    discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url or OFFICIAL_GATEWAY)


SWEEPER_TASK = "discord-approval-expiry"
# The client's tasks that run as long as it does (no turn): stopped at once on drain.
LONG_LIVED = frozenset({SWEEPER_TASK, SCHEDULES_TASK})


class NerveDiscordBot(discord.Client):
    """Claims deliveries, queues their turns (`TurnAnswers` runs them), recovers what a stop left."""

    # How often requests past their expiry are looked for (they go on "not approved in time").
    approval_sweep_every = 15.0
    # At most one live edit of an answer this often (seconds).
    live_edit_every = EDIT_EVERY

    def __init__(
        self,
        agent: Agent,
        settings: DiscordSettings,
        *,
        jobs: TurnJobs | None = None,
        clients: CurrentClient | None = None,
        **options: Any,
    ) -> None:
        """`options` go to discord.py's client (shards); `clients` gives this process's worker its client."""
        point_discord_at(settings)
        intents = discord.Intents.default()
        # Content of DMs, mentions and slash commands arrives without the privileged intent.
        intents.message_content = settings.nerve_discord_message_content
        super().__init__(
            intents=intents,
            allowed_mentions=NO_MENTIONS,
            max_ratelimit_timeout=settings.nerve_discord_max_ratelimit_timeout,
            **options,
        )
        self.agent = agent
        self.settings = settings
        self.tree = app_commands.CommandTree(self)
        self.results = ResultsCache()
        self.guard = ChannelGuard()
        order = ConversationOrder()
        # This client's tasks: `drain` waits for them, `close` cancels them (a job's goes back to the queue).
        self.owned = Owned()
        spawn = self.owned.spawn
        self._tasks = self.owned.tasks
        # Set by `drain` (SIGTERM): deliveries are claimed and kept for the next start, not answered.
        self.stopping = False
        # Where turns run: jobs any process takes (PostgreSQL), else tasks here.
        self._launch = Launcher(jobs, spawn, PLATFORM)
        self._clients = clients or CurrentClient()
        # Claimed and queued one at a time per conversation, so its jobs are in the order people wrote.
        self._intake = ConversationOrder()
        self._held = HeldInteractions()
        self._recorded = Recorded(agent, PLATFORM, self._launch, self._left_over, noun="Discord delivery")
        # Per-person sign-in: the Connect links, /connections, /connect and their Disconnect buttons.
        self.sign_in_links = SignInLinks(
            self, getattr(agent, "connections", None), spawn, expires_in=settings.nerve_sign_in_timeout
        )
        self.approval_flow = ApprovalFlow(
            agent=agent,
            client=self,
            guard=self.guard,
            order=order,
            post=lambda key, reply, reply_to: self.answers.post_to_conversation(key, reply, reply_to),
            spawn=spawn,
            launch=self._launch,
            progress_for=lambda key: TurnLinks(self.sign_in_links).watch(
                self.input_flow.sink(no_progress, self.answers.where_of(key))
            ),
        )
        self.input_flow = InputFlow(
            agent=agent,
            client=self,
            spawn=spawn,
            resume=self.approval_flow.resume_later,
            sweep=self.approval_flow.sweep_soon,
        )
        # With jobs, a turn answered again goes on in the messages of the run before (`TurnPages`).
        inbox = agent.inbox if jobs is not None else None
        self.answers = TurnAnswers(
            client=self,
            agent=agent,
            guard=self.guard,
            order=order,
            records=inbox if isinstance(inbox, PostRecords) else None,
            results=self.results,
            approvals=self.approval_flow,
            inputs=self.input_flow,
            sign_ins=self.sign_in_links,
            edit_every=lambda: self.live_edit_every,
        )
        discord_commands.register(self.tree, agent, settings, self.handle_ask)
        register_sign_in(self.tree, self.sign_in_links)
        # /memory and the memory buttons (Forget, Use anywhere, Undo under an answer).
        self.memory_flow = MemoryFlow(agent)
        register_memory(self.tree, agent)
        # /forget-me (its Delete button asked first) and /export.
        self.rights_flow = RightsFlow(agent)
        register_rights(self.tree, agent)
        # The Discord schedules' due runs (once the bot is ready), /schedules and /timezone.
        self.schedules = DiscordSchedules(
            agent=agent,
            client=self,
            answers=self.answers,
            guard=self.guard,
            order=order,
            grace=settings.nerve_schedule_grace,
            jobs=self._launch.slots,
        )
        register_schedules(self.tree, agent)
        register_usage(self.tree, agent)
        self.add_dynamic_items(ToolResultsButton, DisconnectButton, MemoryButton, RightsButton)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def setup_hook(self) -> None:
        """Runs once per client, after login and before the gateway: sync commands, recover; the
        schedules' runner starts once the gateway is ready."""
        # Approval buttons route by their custom_id, so clicks on messages posted before a restart
        # reach this client too.
        self.add_dynamic_items(ApprovalButton, InputButton)
        await self._sync_commands()
        self._clients.use(self)
        # Listed before the gateway connects: a delivery claimed once it has is this client's own turn,
        # and a list taken later would hold it too, so it would be answered twice.
        await self._recover_deliveries()
        self.owned.spawn(self.approval_flow.desk.recover(), "discord-recover")
        self.owned.spawn(sweep_forever(self.sweep, self.approval_sweep_every), SWEEPER_TASK)
        self.owned.spawn(self.schedules.run_forever(), SCHEDULES_TASK)

    async def on_ready(self) -> None:
        """Say as whom nerve is connected (again after a new session, which may follow an outage)."""
        me, count = self.user, len(self.guilds)
        guilds = "1 guild" if count == 1 else f"{count} guilds"
        log_up("Discord: logged in as %s (%s) with %s", me, me.id if me else "?", guilds)

    async def _sync_commands(self) -> None:
        guild_id = self.settings.discord_guild_id
        guild = discord.Object(id=guild_id) if guild_id else None
        if guild is not None:
            self.tree.copy_global_to(guild=guild)
        try:
            synced = await self.tree.sync(guild=guild)
        except discord.HTTPException as exc:
            logger.error(
                "could not register the slash commands (%s %s); invite the bot with the "
                "applications.commands scope. Mentions and DMs still work.",
                exc.status,
                exc.text,
            )
            return
        where = f"guild {guild_id}" if guild_id else "all guilds (may take a while to appear)"
        logger.info("registered %d slash commands for %s", len(synced), where)

    async def drain(self, grace: float) -> None:
        """SIGTERM: take no new turn (kept for the next start); running ones get `grace` seconds. A
        scheduled run under way stops at once: the next start hands it on, in the same messages."""
        self.stopping = True
        for task in list(self._tasks):
            if task.get_name() in LONG_LIVED:
                task.cancel()
        await self.owned.drain(grace, "Discord turn(s)")

    async def close(self) -> None:
        """Cancel running turns: their deliveries are answered after restart, or their jobs requeued."""
        self._clients.drop(self)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await super().close()

    async def _recover_deliveries(self) -> None:
        """At start-up: the deliveries left unfinished (with jobs, those no job holds), each answered in
        a task of its own. A failure to look is logged and the start goes on: with jobs, the sweep
        queues them later; without, the next start answers them."""

        def answer(event_id: str, job: Job) -> None:
            logger.info("answering %s left unfinished before the restart as a channel message", event_id)
            self.owned.spawn(self.answers.answer(job), f"discord-recover-{event_id}")

        try:
            await self._recorded.recover(answer)
        except Exception:
            logger.exception("could not look for Discord deliveries left unfinished before the restart")

    async def _left_over(self, event_id: str, payload: str) -> Job | None:
        """The job of a recorded delivery answered later (a restart, a job); an unreadable one is dropped."""
        try:
            return replace(Job.from_json(payload), replayed=True)
        except (ValueError, TypeError, KeyError):
            logger.warning("dropping unreadable unfinished Discord delivery %s", event_id)
            await self.agent.inbox.finish_event(PLATFORM, event_id)
            return None

    async def sweep(self) -> None:
        """Expire the requests whose time ran out; with jobs, queue deliveries a dead process left."""
        await sweep(self._recorded, self.approval_flow.desk)

    async def answer_event(self, event_id: str) -> None:
        """A recorded delivery's job: through its token if this client holds it, else channel messages."""
        job = await self._recorded.take(event_id)
        if job is None:
            return
        await self.answers.answer(job, self._held.take(event_id) if job.kind == "interaction" else None)

    # --- messages ----------------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        if self.user is None:
            return
        incoming = to_incoming(message, self.user.id)
        if incoming is None or incoming.event_id is None:
            return
        job = job_for(
            incoming,
            kind="message",
            channel_id=message.channel.id,
            message_id=message.id,
            attachments=message.attachments,
        )
        await self._take(job)

    async def _take(self, job: Job, interaction: discord.Interaction[Any] | None = None) -> None:
        """Claim a delivery and launch its turn, one conversation at a time from before the first await
        (discord.py runs each event as a task of its own)."""
        async with self._intake.hold(job.key):
            if not await self.agent.inbox.claim_event(PLATFORM, job.event_id, job.to_json()):
                logger.debug("ignoring re-delivered %s %s", job.kind, job.event_id)
                return
            if self.stopping:
                logger.info("kept %s for the next start: nerve is shutting down", job.event_id)
                return
            if interaction is not None and self._launch.jobs is not None:
                # Answered through its token if this process's worker takes the job in time.
                self._held.hold(job.event_id, interaction)
            await self._launch.event(job.event_id, job.key, lambda: self.answers.answer(job, interaction))

    # --- /ask --------------------------------------------------------------------------------------

    async def handle_ask(
        self,
        interaction: discord.Interaction[Any],
        question: str | None = None,
        attachments: Sequence[discord.Attachment] = (),
    ) -> None:
        """Defer first (the 3-second deadline), then claim and run the turn. `question` is a started
        prompt's text (the interaction may be deferred already); `attachments` its `file` option."""
        try:
            done = interaction.response.is_done()
            callback = None if done else await interaction.response.defer(thinking=True)
        except discord.HTTPException as exc:
            # Already acknowledged (a re-delivery) or too late: nothing can be answered on this token.
            logger.warning("could not acknowledge /ask %s: %s %s", interaction.id, exc.status, exc.text)
            return
        if self.user is None:
            return
        answer_id = callback.message_id if callback is not None else None
        if answer_id is None and interaction.guild_id is not None:
            answer_id = await response_id(interaction)
        incoming = to_incoming(
            interaction, self.user.id, answer_id=answer_id, text=question, attachments=attachments
        )
        if incoming is None or incoming.event_id is None:
            await interaction.followup.send(NEED_QUESTION, allowed_mentions=NO_MENTIONS)
            return
        job = job_for(
            incoming,
            kind="interaction",
            channel_id=interaction.channel_id or 0,
            message_id=answer_id or 0,
            attachments=attachments,
        )
        await self._take(job, interaction)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Every interaction: a form opened before a restart has no modal here to take its submit."""
        await self.input_flow.stale_submit(interaction)


# Discord lets an interaction's token answer for 15 minutes; a little less, to finish within it.
INTERACTION_SECONDS = 14 * 60


class CurrentClient:
    """The Discord client of this process that its worker's jobs run on: the newest logged in."""

    def __init__(self) -> None:
        self._client: NerveDiscordBot | None = None
        self._here = asyncio.Event()

    def use(self, client: NerveDiscordBot) -> None:
        self._client = client
        self._here.set()

    def drop(self, client: NerveDiscordBot) -> None:
        """`client` is closing: jobs wait for the next one."""
        if self._client is client:
            self._client = None
            self._here.clear()

    async def client(self) -> NerveDiscordBot:
        while True:
            await self._here.wait()
            if self._client is not None:
                return self._client

    def job_handlers(self) -> dict[str, JobHandler]:
        async def on_client(work: Callable[[NerveDiscordBot], Coroutine[Any, Any, None]], name: str) -> None:
            client = await self.client()
            await client.owned.spawn(work(client), name)

        return jobs_runtime.job_handlers(
            PLATFORM,
            lambda event_id: on_client(lambda c: c.answer_event(event_id), f"discord-job-{event_id}"),
            lambda request_id: on_client(
                lambda c: c.approval_flow.desk.go_on_here(request_id), f"discord-resume-{request_id}"
            ),
            lambda key: on_client(lambda c: c.approval_flow.answer_deferred(key), f"discord-deferred-{key}"),
            run_slot=lambda schedule_id, slot: on_client(
                lambda c: c.schedules.run_slot(schedule_id, slot), f"discord-schedule-{schedule_id}"
            ),
        )


@dataclass
class HeldInteractions:
    """The interactions this client received whose answer may still go through their token."""

    _held: dict[str, tuple[discord.Interaction[Any], float]] = field(default_factory=dict)

    def hold(self, event_id: str, interaction: discord.Interaction[Any]) -> None:
        now = time.monotonic()
        self._held = {e: held for e, held in self._held.items() if held[1] > now}
        self._held[event_id] = (interaction, now + INTERACTION_SECONDS)

    def take(self, event_id: str) -> discord.Interaction[Any] | None:
        held = self._held.pop(event_id, None)
        return None if held is None or held[1] <= time.monotonic() or held[0].is_expired() else held[0]

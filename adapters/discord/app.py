"""nerve on Discord: slash commands, mentions, threads and DMs, with collapsible tool results.

`run_discord(agent, settings)` is what `nerve discord` runs. The bot answers:

* `/ask` — defers at once (Discord's 3-second deadline), shows the answer in the deferred message
  as it is written (`live.py`) and opens a thread on it for follow-ups (in a DM it just answers);
* a mention in a channel — a reply shown as it is written, plus a thread on the mention;
* messages in its threads (or mentions in any thread) — the thread's conversation continues;
* DMs — the user's private conversation.

Exactly-once: every delivery is claimed in the agent's inbox (gateway re-deliveries are dropped)
and marked finished once answered; at start-up, deliveries left unfinished by a crash are answered
as channel messages (an interaction's token does not survive that long). With NERVE_DATABASE_URL,
each claimed delivery is queued as a job that any `nerve discord` process's worker answers
(`adapters.discord.jobs`).

`DISCORD_API_BASE_URL` and `DISCORD_GATEWAY_URL` are applied to discord.py's class attributes
(`Route.BASE`, `DiscordWebSocket.DEFAULT_GATEWAY`): they are process-wide, so one process talks to
one Discord.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from adapters.common.intake import Recorded, sweep, sweep_forever
from adapters.common.tasks import Owned
from adapters.discord import commands as discord_commands
from adapters.discord.approval_buttons import ApprovalButton, Click
from adapters.discord.approval_flow import ApprovalAgent, ApprovalFlow
from adapters.discord.delivery import (
    NO_MENTIONS,
    ChannelGuard,
    ConversationOrder,
    Typing,
    reply_reference,
    send_chunks,
)
from adapters.discord.incoming import DM_WORKSPACE, PLATFORM, Job, answer_channel, job_for, to_incoming
from adapters.discord.input_message import InputBoard, InputButton, InputClick, Where
from adapters.discord.input_modal import InputAgent, InputFlow
from adapters.discord.jobs import CurrentClient, HeldInteractions, Launcher
from adapters.discord.kept_pages import TurnPages
from adapters.discord.live import EDIT_EVERY, LiveAnswer
from adapters.discord.ops import count_rate_limit_waits, gateway_up
from adapters.discord.pages import (
    ChannelPage,
    ChannelPoster,
    InteractionPage,
    InteractionPoster,
    Page,
    Poster,
    post_files,
)
from adapters.discord.prompt_command import PromptAgent
from adapters.discord.render import ResultsCache, reply_chunks
from adapters.discord.settings import DiscordSettings
from adapters.discord.sign_in import DisconnectButton, SignInLinks, resume_signed_in
from adapters.discord.sign_in import register as register_sign_in
from adapters.discord.views import ToolResultsButton, new_ref, results_button_view
from adapters.jobs_runtime import drained, shared_jobs, work
from adapters.oauth_http import SignInEndpoints, sign_in_endpoints
from adapters.ops_http import OpsEndpoints, PlatformLink
from adapters.up_line import log_up
from bot.errors import ConfigError, StartupError
from bot.seams import Inbox, PostRecords
from bot.text.render import truncate
from bot.types import AgentReply, ConversationKey, Incoming, Progress, ToolSpec, no_progress

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

OFFICIAL_GATEWAY = "wss://gateway.discord.gg/"
APOLOGY = "Sorry — something went wrong on my side while answering. Please try again in a moment."
NEED_QUESTION = "Please give me a question, e.g. `/ask question: what is the air quality in 94107?`"
# Gateway close codes that no reconnect can fix: bad token, bad shard or intents setup.
FATAL_CLOSE_CODES = {
    4004: "authentication failed",
    4010: "invalid shard",
    4011: "sharding required",
    4012: "invalid API version",
    4013: "invalid intents",
    4014: "disallowed intents",
}


class DiscordAgent(ApprovalAgent, InputAgent, PromptAgent, Protocol):
    """What the bot needs from the core `Agent`."""

    inbox: Inbox

    async def reply(self, incoming: Incoming, progress: Progress = ...) -> AgentReply: ...

    async def reset(self, key: ConversationKey) -> None: ...

    def tools(self, incoming: Incoming | None = None) -> list[ToolSpec]: ...

    def server_states(self) -> dict[str, bool]: ...


def point_discord_at(settings: DiscordSettings) -> None:
    """Aim discord.py's REST and gateway at the configured endpoints (process-wide class attributes)."""
    discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url or OFFICIAL_GATEWAY)


def thread_name(question: str) -> str:
    """A thread title from the question: one line, within Discord's 100 characters."""
    return truncate(" ".join(question.split()), 90)[0] or "nerve"


SWEEPER_TASK = "discord-approval-expiry"


class NerveDiscordBot(discord.Client):
    """The Discord client: parses deliveries into `Incoming`, runs turns, renders replies."""

    # How often requests past their expiry are looked for (they go on "not approved in time").
    approval_sweep_every = 15.0
    # At most one live edit of an answer this often (seconds).
    live_edit_every = EDIT_EVERY

    def __init__(
        self,
        agent: DiscordAgent,
        settings: DiscordSettings,
        *,
        jobs: TurnJobs | None = None,
        clients: CurrentClient | None = None,
        **options: Any,
    ) -> None:
        """`options` go to discord.py's client as they are (the shards of `ShardedNerveDiscordBot`).

        With `jobs`, every turn is queued for whichever process's worker is free; `clients` is where
        this process's worker finds the client to run its jobs on (`adapters.discord.jobs`)."""
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
        self._order = ConversationOrder()
        self._thread_refused: set[int] = set()
        self._owned = Owned()
        self._tasks = self._owned.tasks
        # Set by `drain` (SIGTERM): deliveries are claimed and kept for the next start, not answered.
        self.stopping = False
        # Where turns run: jobs any process takes (PostgreSQL), else tasks here.
        self._launch = Launcher(jobs, self._spawn)
        self._clients = clients
        # Claimed and queued one at a time per conversation, so its jobs are in the order people wrote.
        self._intake = ConversationOrder()
        self._held = HeldInteractions()
        self._recorded = Recorded(agent, PLATFORM, self._launch, self._left_over, noun="Discord delivery")
        # With jobs, a turn answered again goes on in the messages of the run before (`kept_pages`).
        inbox = agent.inbox if jobs is not None else None
        self._records = inbox if isinstance(inbox, PostRecords) else None
        self.approval_flow = ApprovalFlow(
            agent=agent,
            client=self,
            guard=self.guard,
            order=self._order,
            post=self.post_to_conversation,
            spawn=self._spawn,
            launch=self._launch,
            progress_for=lambda key: self.sign_in_links.watch(
                self.input_flow.sink(no_progress, self._where_of(key))
            ),
        )
        self.input_flow = InputFlow(
            agent=agent,
            board=InputBoard(self, guard=self.guard, spawn=self._spawn),
            resume=self.approval_flow.resume_later,
            sweep=lambda: self._spawn(self.approval_flow.sweep(), "discord-approval-sweep"),
        )
        discord_commands.register(self)
        self.add_dynamic_items(ToolResultsButton)
        # Per-person sign-in: the Connect links, /connections, /connect and their Disconnect buttons.
        self.sign_in_links = SignInLinks(
            self, getattr(agent, "connections", None), self._spawn, expires_in=settings.nerve_sign_in_timeout
        )
        register_sign_in(self)
        self.add_dynamic_items(DisconnectButton)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def setup_hook(self) -> None:
        """Runs once per client, after login and before the gateway: sync commands, recover."""
        # Approval buttons route by their custom_id, so clicks on messages posted before a restart
        # reach this client too.
        self.add_dynamic_items(ApprovalButton, InputButton)
        await self._sync_commands()
        if self._clients is not None:
            self._clients.use(self)
        self._spawn(self._recover(), "discord-recover")
        self._spawn(sweep_forever(self.sweep, self.approval_sweep_every), SWEEPER_TASK)

    async def on_ready(self) -> None:
        """The gateway's READY and the guilds that came with it: say as whom nerve is connected (again
        after a new session, which Discord may send after an outage)."""
        me, count = self.user, len(self.guilds)
        guilds = "1 guild" if count == 1 else f"{count} guilds"
        log_up("Discord: logged in as %s (%s) with %s", me, me.id if me else "?", guilds)

    async def _sync_commands(self) -> None:
        guild_id = self.settings.discord_guild_id
        try:
            if guild_id:
                guild = discord.Object(id=guild_id)
                self.tree.copy_global_to(guild=guild)
                synced = await self.tree.sync(guild=guild)
            else:
                synced = await self.tree.sync()
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
        """SIGTERM: take no new turn (deliveries are kept in the inbox for the next start) and give the
        running ones up to `grace` seconds to finish; `close` cuts off the rest."""
        self.stopping = True
        for task in list(self._tasks):
            if task.get_name() == SWEEPER_TASK:
                task.cancel()
        await self._owned.drain(grace, "Discord turn(s)")

    async def close(self) -> None:
        """Cancel running turns (their deliveries stay unfinished and are answered after restart, or
        their jobs go back to the queue)."""
        if self._clients is not None:
            self._clients.drop(self)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await super().close()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str | None = None) -> None:
        self._start(coro, name)

    def _start(self, coro: Coroutine[Any, Any, None], name: str | None = None) -> asyncio.Task[None]:
        """A task this client owns: `drain` waits for it, `close` cancels it."""
        return self._owned.spawn(coro, name)

    async def _recover(self) -> None:
        """At start-up: answer the deliveries left unfinished; with jobs, queue those that have no job
        waiting or running (another process may be answering the rest right now)."""
        await self._recorded.recover(self._answer_left_over)
        await self.approval_flow.desk.recover()

    def _answer_left_over(self, event_id: str, job: Job) -> None:
        logger.info("answering %s left unfinished before the restart as a channel message", event_id)
        self._spawn(self._answer_message(job), f"discord-recover-{event_id}")

    async def _left_over(self, event_id: str, payload: str) -> Job | None:
        """The job of a recorded delivery, answered outside its delivery (a restart, a job): it waits
        for a turn slot however many there are. An unreadable one is dropped with a log line."""
        try:
            return replace(Job.from_json(payload), replayed=True)
        except (ValueError, TypeError, KeyError):
            logger.warning("dropping unreadable unfinished Discord delivery %s", event_id)
            await self.agent.inbox.finish_event(PLATFORM, event_id)
            return None

    async def sweep(self) -> None:
        """Expire the requests whose time ran out (their turns go on). With jobs, also queue the
        deliveries a process recorded but died before queueing."""
        await sweep(self._recorded, self.approval_flow.desk)

    # --- jobs (`adapters.discord.jobs`) --------------------------------------------------------------

    async def run_job(self, job: Coroutine[Any, Any, None], name: str) -> None:
        """A job's work, as a task of this client: `drain` waits for it and `close` cuts it off. Cut
        off, the job's handler ends cancelled too, and the job goes back to the queue for this
        process's next client or another process; a handler cancelled (a drain) cancels it."""
        await self._start(job, name)

    async def answer_event(self, event_id: str) -> None:
        """The job of one recorded delivery (any process may run it): answer it unless it was. An
        interaction this client still holds is answered through its token, any other delivery as
        channel messages (as after a restart)."""
        job = await self._recorded.take(event_id)
        if job is None:
            return
        interaction = self._held.take(event_id) if job.kind == "interaction" else None
        if interaction is not None:
            await self._answer_interaction(interaction, job)
        else:
            await self._answer_message(job)

    async def go_on(self, request_id: str) -> None:
        """The job of a parked turn with nothing left to wait for: its approval message shows the
        outcome, the turn answers once, then the messages that waited behind it are answered."""
        await self.approval_flow.desk.go_on_here(request_id)

    async def answer_deferred(self, key: ConversationKey) -> None:
        """The job of the messages that waited in a conversation whose turn is no longer parked."""
        await self.approval_flow.answer_deferred(key)

    # --- messages ----------------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        if self.user is None:
            return
        incoming = to_incoming(message, self.user.id)
        if incoming is None or incoming.event_id is None:
            return
        job = job_for(incoming, kind="message", channel_id=message.channel.id, message_id=message.id)
        # Held from before the first await: discord.py runs each event as a task of its own.
        async with self._intake.hold(job.key):
            if not await self.agent.inbox.claim_event(PLATFORM, incoming.event_id, job.to_json()):
                logger.debug("ignoring re-delivered message %s", message.id)
                return
            if self.stopping:
                logger.info("kept %s for the next start: nerve is shutting down", incoming.event_id)
                return
            await self._launch.event(job.event_id, job.key, lambda: self._answer_message(job))

    def _channel(self, job: Job) -> discord.PartialMessageable:
        guild_id = None if job.key.workspace == DM_WORKSPACE else int(job.key.workspace)
        return self.get_partial_messageable(job.channel_id, guild_id=guild_id)

    async def _answer_message(self, job: Job) -> None:
        """A turn answered with channel messages: a reply to the user's message, then the thread."""
        async with self._delivery(job), self._order.hold(job.key):
            if self.guard.blocked(job.channel_id):
                return
            channel = self._channel(job)
            guild_id = channel.guild.id if channel.guild else None
            reference = None
            if job.message_id:
                reference = reply_reference(job.channel_id, job.message_id, guild_id)
            poster = ChannelPoster(channel, guard=self.guard, channel_id=job.channel_id, reference=reference)
            kept: TurnPages | None = None
            shown: list[Page] = []
            answer: Poster = poster
            if self._records is not None:
                kept = TurnPages(
                    self._records, job.event_id, channel, poster, guard=self.guard, channel_id=job.channel_id
                )
                shown = list(await kept.load())
                answer = kept
            live = LiveAnswer(answer, pages=shown, every=self.live_edit_every)
            progress = self.sign_in_links.watch(
                self.input_flow.sink(
                    live.progress, Where(channel=channel, channel_id=job.channel_id, reference=reference)
                )
            )
            async with Typing(channel):
                try:
                    reply = await self._run_turn(job.incoming, progress)
                finally:
                    await live.stop()
            if reply.approval is not None:
                await self._show_approval_live(live, job.channel_id, guild_id, reply, reference)
            else:
                chunks, view = self._render(reply)
                await live.deliver(chunks, view)
                if kept is None:
                    await post_files(poster, reply.attachments)
                elif reply.attachments and await kept.take_files():
                    await post_files(poster, reply.attachments)
                    await kept.files_done()
            if job.open_thread:
                await self._open_thread(job)

    async def _show_approval_live(
        self,
        live: LiveAnswer,
        channel_id: int,
        guild_id: int | None,
        reply: AgentReply,
        reference: discord.MessageReference | None,
    ) -> None:
        """A parked turn: its live message becomes the approval message (one message, as for /ask);
        with no live message yet, the approval message is posted as a reply."""
        assert reply.approval is not None
        first = live.pages[0] if live.pages else None
        if isinstance(first, ChannelPage) and await self.approval_flow.show_in_message(
            first.message, reply.approval, channel_id
        ):
            await live.discard(keep=1)
            return
        await live.discard()
        await self.post_reply(channel_id, guild_id, reply, reference=reference)

    # --- /ask --------------------------------------------------------------------------------------

    async def handle_ask(self, interaction: discord.Interaction[Any], question: str | None = None) -> None:
        """Defer first (the 3-second deadline), then claim the delivery and run the turn in the background.

        `question` is the turn's text when it is not the `question` option (a started prompt's text);
        the interaction may then be deferred already.
        """
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
            try:
                answer_id = (await interaction.original_response()).id
            except discord.HTTPException:
                answer_id = None
        incoming = to_incoming(interaction, self.user.id, answer_id=answer_id, text=question)
        if incoming is None or incoming.event_id is None:
            await interaction.followup.send(NEED_QUESTION, allowed_mentions=NO_MENTIONS)
            return
        job = job_for(
            incoming, kind="interaction", channel_id=interaction.channel_id or 0, message_id=answer_id or 0
        )
        async with self._intake.hold(job.key):
            if not await self.agent.inbox.claim_event(PLATFORM, incoming.event_id, job.to_json()):
                return
            if self.stopping:
                logger.info("kept %s for the next start: nerve is shutting down", incoming.event_id)
                return
            if self._launch.jobs is not None:
                # Answered through its token if this process's worker takes the job in time.
                self._held.hold(job.event_id, interaction)
            await self._launch.event(
                job.event_id, job.key, lambda: self._answer_interaction(interaction, job)
            )

    async def _answer_interaction(self, interaction: discord.Interaction[Any], job: Job) -> None:
        async with self._delivery(job), self._order.hold(job.key):
            # After the token's 15 minutes (or when Discord forgot the webhook) the answer goes on
            # as channel messages replying to the deferred response.
            reference = None
            if job.message_id:
                reference = reply_reference(job.channel_id, job.message_id, interaction.guild_id)
            fallback = ChannelPoster(
                self._channel(job), guard=self.guard, channel_id=job.channel_id, reference=reference
            )
            live = LiveAnswer(
                InteractionPoster(interaction, fallback),
                pages=[InteractionPage(interaction, message_id=job.message_id or None)],
                every=self.live_edit_every,
            )
            where = Where(channel=self._channel(job), channel_id=job.channel_id, reference=reference)
            links = self.sign_in_links.for_turn(interaction)
            try:
                reply = await self._run_turn(
                    job.incoming, links.watch(self.input_flow.sink(live.progress, where))
                )
            finally:
                await live.stop()
            if reply.approval is not None:
                await live.discard()
                await self._show_approval(interaction, job, reply)
            else:
                chunks, view = self._render(reply)
                await live.deliver(chunks, view)
                await post_files(InteractionPoster(interaction, fallback), reply.attachments)
            await links.flush()
            if job.open_thread:
                await self._open_thread(job)

    async def _show_approval(
        self, interaction: discord.Interaction[Any], job: Job, reply: AgentReply
    ) -> None:
        """The deferred answer becomes the approval message; in the channel if its token failed."""
        assert reply.approval is not None
        message_id = job.message_id
        if not message_id and not interaction.is_expired():
            try:
                message_id = (await interaction.original_response()).id
            except discord.HTTPException:
                message_id = 0
        if (
            message_id
            and not interaction.is_expired()
            and await self.approval_flow.show_in_interaction(
                interaction, reply.approval, job.channel_id, message_id
            )
        ):
            return
        reference = reply_reference(job.channel_id, message_id, interaction.guild_id) if message_id else None
        await self.post_reply(job.channel_id, interaction.guild_id, reply, reference=reference)

    # --- shared ------------------------------------------------------------------------------------

    async def post_reply(
        self,
        channel_id: int,
        guild_id: int | None,
        reply: AgentReply,
        *,
        reference: discord.MessageReference | None = None,
    ) -> bool:
        """Post a reply as channel messages: the answer's chunks, or the approval message of a parked
        turn. False when nothing could be posted."""
        channel = self.get_partial_messageable(channel_id, guild_id=guild_id)
        if reply.approval is not None:
            posted = await self.approval_flow.post_prompt(channel, channel_id, reply.approval, reference)
            return posted is not None
        chunks, view = self._render(reply)
        sent = await send_chunks(
            channel, chunks, guard=self.guard, channel_id=channel_id, view=view, reference=reference
        )
        if sent:
            await post_files(
                ChannelPoster(channel, guard=self.guard, channel_id=channel_id), reply.attachments
            )
        return bool(sent)

    async def post_to_conversation(
        self, key: ConversationKey, reply: AgentReply, reply_to: int | None
    ) -> None:
        """Post a reply that comes after its turn (an approval, a message that waited) in the
        conversation's thread or DM; in the thread's channel if the thread is not there."""
        channel_id, guild_id = answer_channel(key)
        reference = reply_reference(channel_id, reply_to, guild_id) if reply_to else None
        if await self.post_reply(channel_id, guild_id, reply, reference=reference):
            return
        parent = int(key.channel)
        if guild_id is not None and parent != channel_id and not self.guard.blocked(parent):
            await self.post_reply(parent, guild_id, reply)

    def _where_of(self, key: ConversationKey) -> Where:
        """Where a conversation's later messages go (its thread or DM): a resumed turn's questions."""
        channel_id, guild_id = answer_channel(key)
        return Where(
            channel=self.get_partial_messageable(channel_id, guild_id=guild_id), channel_id=channel_id
        )

    async def approval_clicked(self, interaction: discord.Interaction[Any], click: Click) -> None:
        """A click on an approval button (routed here by `ApprovalButton`)."""
        await self.approval_flow.clicked(interaction, click)

    async def disconnect_clicked(self, interaction: discord.Interaction[Any], server: str) -> None:
        """A click on a Disconnect button of /connections (routed by `DisconnectButton`)."""
        await self.sign_in_links.disconnect(interaction, server)

    async def input_clicked(self, interaction: discord.Interaction[Any], click: InputClick) -> None:
        """A click on a server's request for input or a step of its form (routed by `InputButton`)."""
        await self.input_flow.clicked(interaction, click)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Every interaction: a form opened before a restart has no modal here to take its submit."""
        await self.input_flow.stale_submit(interaction)

    async def _run_turn(self, incoming: Incoming, progress: Progress) -> AgentReply:
        try:
            return await self.agent.reply(incoming, progress)
        except Exception:
            logger.exception("turn failed for %s", incoming.key)
            return AgentReply(text=APOLOGY)

    def _render(self, reply: AgentReply) -> tuple[list[str], discord.ui.View | None]:
        chunks = reply_chunks(reply)
        if not reply.attachments:
            return chunks, None
        ref = new_ref()
        self.results.put(ref, reply.attachments)
        return chunks, results_button_view(ref)

    async def _open_thread(self, job: Job) -> None:
        """Open the follow-up thread on the message whose id the conversation key already carries."""
        if job.channel_id in self._thread_refused or self.guard.blocked(job.channel_id):
            return
        try:
            await self.http.start_thread_with_message(
                job.channel_id, job.message_id, name=thread_name(job.text), auto_archive_duration=1440
            )
        except discord.Forbidden as exc:
            self._thread_refused.add(job.channel_id)
            logger.warning(
                "cannot open threads in channel %s (403: %s); give the bot Create Public Threads there",
                job.channel_id,
                exc.text,
            )
        except discord.HTTPException as exc:
            # 160004: a thread already exists on that message (e.g. answered again after a restart).
            logger.info("no thread opened on message %s: %s %s", job.message_id, exc.status, exc.text)

    def _delivery(self, job: Job) -> _Delivery:
        return _Delivery(self.agent.inbox, job)


class ShardedNerveDiscordBot(NerveDiscordBot, discord.AutoShardedClient):
    """The same bot over several gateway connections, one per shard this process runs.

    Only when NERVE_DISCORD_SHARD_COUNT is set: discord.py's auto-sharded client without a count
    asks Discord for one and connects to the gateway URL Discord names, which would bypass
    DISCORD_GATEWAY_URL, so an unsharded bot stays the plain client it always was.
    """

    def __init__(
        self,
        agent: DiscordAgent,
        settings: DiscordSettings,
        *,
        jobs: TurnJobs | None = None,
        clients: CurrentClient | None = None,
    ) -> None:
        super().__init__(
            agent,
            settings,
            jobs=jobs,
            clients=clients,
            shard_count=settings.nerve_discord_shard_count,
            shard_ids=settings.discord_shard_ids,
        )


def new_bot(
    agent: DiscordAgent,
    settings: DiscordSettings,
    *,
    jobs: TurnJobs | None = None,
    clients: CurrentClient | None = None,
) -> NerveDiscordBot:
    """The client the settings ask for: sharded when NERVE_DISCORD_SHARD_COUNT is set. With `jobs`,
    its turns are jobs, run by the client `clients` names (`adapters.discord.jobs`)."""
    if settings.nerve_discord_shard_count is not None:
        return ShardedNerveDiscordBot(agent, settings, jobs=jobs, clients=clients)
    return NerveDiscordBot(agent, settings, jobs=jobs, clients=clients)


class _Delivery:
    """One top-level net per delivery: log, apologise if nothing was said, and mark it answered.

    Only cancellation (shutdown) leaves the delivery unfinished, so a restart answers it then.
    """

    def __init__(self, inbox: Inbox, job: Job) -> None:
        self._inbox = inbox
        self._job = job

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        if exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            return False
        if exc is not None:
            logger.exception("answering %s failed", self._job.event_id, exc_info=exc)
        try:
            await self._inbox.finish_event(PLATFORM, self._job.event_id)
        except Exception:
            logger.exception("could not mark %s as answered", self._job.event_id)
        return exc is not None and isinstance(exc, Exception)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartPolicy:
    """How `run_discord` restarts a dead client without burning Discord's daily IDENTIFY budget."""

    initial: float = 2.0
    maximum: float = 300.0
    # A client that stayed up this long was healthy: the next failure starts from `initial` again.
    healthy_after: float = 600.0


def check_settings(settings: DiscordSettings) -> str:
    """The bot token; fails before anything starts when it is missing."""
    if settings.discord_bot_token is None:
        raise ConfigError(
            "DISCORD_BOT_TOKEN is not set: create a bot at https://discord.com/developers/applications"
        )
    return settings.discord_bot_token.get_secret_value()


async def run_discord(
    agent: DiscordAgent,
    settings: DiscordSettings,
    *,
    policy: RestartPolicy | None = None,
    ops_ready: asyncio.Future[str] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the bot until cancelled, or until `stop` is set (SIGTERM): `/readyz` answers 503 at once,
    new deliveries are kept for the next start, running turns get NERVE_SHUTDOWN_GRACE seconds and
    the rest are cut off (answered at the next start). Restart the client with bounded exponential
    backoff when it dies.

    Raises `ConfigError` for what no restart can fix: a missing or rejected token, or intents the
    application is not allowed to use; `StartupError` when Discord cannot be reached before the
    first login. /healthz, /readyz and /metrics answer at NERVE_HTTP_HOST:NERVE_HTTP_PORT from the
    start (`adapters.ops_http`; `ops_ready` receives their base URL).

    With NERVE_DATABASE_URL, turns are jobs: this process runs a worker for Discord's jobs
    (NERVE_WORKER_CONCURRENCY at a time, on whichever client is logged in), `/readyz` says when it
    is not taking jobs, and SIGTERM drains it with the client's own turns.
    """
    token = check_settings(settings)
    stop = stop or asyncio.Event()
    ops = OpsEndpoints(agent, PlatformLink("Discord"), ready=ops_ready, stopping=stop)
    # The browser's way back after signing in, on the same port.
    sign_ins = sign_in_endpoints(getattr(agent, "connections", None), settings.nerve_public_url, "Discord")
    if sign_ins is not None:
        ops.routes.append(sign_ins.install)
    async with ops.serving(settings.nerve_http_host, settings.nerve_http_port), shared_jobs(settings) as jobs:
        clients = CurrentClient()
        if jobs is not None:
            work(jobs, clients, settings)
            ops.worker = jobs.worker_alive
        await _run_restarting(
            agent,
            settings,
            token,
            policy or RestartPolicy(),
            ops.platform,
            stop,
            sign_ins=sign_ins,
            jobs=jobs,
            clients=clients,
        )


async def _stop_when_asked(
    stop: asyncio.Event, bot: NerveDiscordBot, jobs: TurnJobs | None, grace: float
) -> None:
    """Wind `bot` down once `stop` is set: its running turns and the worker's jobs get `grace`
    (the jobs still running then go back to the queue), then it closes."""
    await stop.wait()
    await drained(bot, jobs, grace)
    await bot.close()


async def _run_restarting(
    agent: DiscordAgent,
    settings: DiscordSettings,
    token: str,
    policy: RestartPolicy,
    platform: PlatformLink,
    stop: asyncio.Event,
    *,
    sign_ins: SignInEndpoints | None = None,
    jobs: TurnJobs | None = None,
    clients: CurrentClient | None = None,
) -> None:
    """`run_discord`'s loop: a new client after each death, `platform` told how to see the newest
    (`sign_ins` which client goes on with the turns a sign-in lets go on, and `clients` which one
    runs the worker's jobs)."""
    count_rate_limit_waits()
    # nerve never joins voice channels: the warnings about missing voice libraries are only noise.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    loop = asyncio.get_running_loop()
    delay = policy.initial
    logged_in = False  # once Discord answered a login, a later outage is one to wait out
    while True:
        bot = new_bot(agent, settings, jobs=jobs, clients=clients)
        platform.connected(functools.partial(gateway_up, bot))
        if sign_ins is not None:
            sign_ins.resume = resume_signed_in(bot.approval_flow.resume_later)
        started = loop.time()
        failure: BaseException
        stopper = asyncio.create_task(_stop_when_asked(stop, bot, jobs, settings.nerve_shutdown_grace))
        try:
            async with bot:
                await bot.start(token)
            return
        except (aiohttp.ClientConnectionError, OSError) as exc:
            logged_in = logged_in or bot.application is not None
            if not logged_in:
                # Never reached Discord: a wrong address or no network, which restarts would not fix.
                raise StartupError(
                    f"cannot reach Discord at {settings.discord_api_base_url} ({exc}): check the network, "
                    "or DISCORD_API_BASE_URL if you set it"
                ) from None
            failure = exc
        except discord.LoginFailure:
            raise ConfigError(
                "Discord rejected DISCORD_BOT_TOKEN (401 Unauthorized): copy the bot token again from the "
                "Developer Portal (Bot → Reset Token)"
            ) from None
        except discord.PrivilegedIntentsRequired:
            raise ConfigError(
                "Discord refused the Message Content intent: enable it for the bot in the Developer Portal "
                "(Bot → Privileged Gateway Intents) or turn it off in nerve's settings"
            ) from None
        except discord.ConnectionClosed as exc:
            if exc.code in FATAL_CLOSE_CODES:
                raise ConfigError(
                    f"Discord closed the gateway: {FATAL_CLOSE_CODES[exc.code]} (code {exc.code})"
                ) from None
            failure = exc
        except (discord.DiscordException, aiohttp.ClientError, TimeoutError) as exc:
            failure = exc
        finally:
            if stop.is_set():
                await stopper  # the drain and close under way end first
            else:
                stopper.cancel()
        if stop.is_set():
            return
        logged_in = logged_in or bot.application is not None
        if loop.time() - started >= policy.healthy_after:
            delay = policy.initial
        logger.error(
            "the Discord client stopped (%s: %s); restarting in %.1f s",
            type(failure).__name__,
            failure,
            delay,
        )
        await asyncio.sleep(delay)
        delay = min(delay * 2, policy.maximum)

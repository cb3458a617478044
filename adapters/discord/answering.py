"""Answering a turn on Discord: the live answer, the reply, the approval message, the thread.

Every delivery is marked answered once done, so only a stop leaves it for the next start.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

import discord

from adapters.discord.approvals import ApprovalFlow
from adapters.discord.delivery import (
    ChannelGuard,
    ConversationOrder,
    reply_reference,
    response_id,
    results_button_view,
    typing,
    view_of,
)
from adapters.discord.incoming import DM_WORKSPACE, PLATFORM, Job, answer_channel
from adapters.discord.input_flow import InputFlow
from adapters.discord.live import LiveAnswer
from adapters.discord.memory import undo_buttons
from adapters.discord.pages import (
    ChannelPage,
    ChannelPoster,
    InteractionPage,
    InteractionPoster,
    Page,
    Poster,
    TurnPages,
    post_files,
)
from adapters.discord.render import ResultsCache, reply_chunks
from adapters.discord.sign_in import SignInLinks, TurnLinks
from bot.agent import Agent, PostRecords
from bot.text import truncate
from bot.types import AgentReply, ApprovalPrompt, ConversationKey, Progress

logger = logging.getLogger(__name__)

# Discord's error code when a thread was started on that message before.
THREAD_EXISTS = 160004
APOLOGY = "Sorry — something went wrong on my side while answering. Please try again in a moment."


# A turn to run, reporting to the progress sink it is given.
Turn = Callable[[Progress], Awaitable[AgentReply]]


@dataclass(eq=False)
class TurnAnswers:
    """Runs one client's turns and posts their replies; `edit_every()` (seconds) is read at each turn."""

    _: KW_ONLY
    client: discord.Client
    agent: Agent
    guard: ChannelGuard
    order: ConversationOrder
    # With jobs, a turn answered again goes on in the messages of the run before (`TurnPages`).
    records: PostRecords | None
    results: ResultsCache
    approvals: ApprovalFlow
    inputs: InputFlow
    sign_ins: SignInLinks
    edit_every: Callable[[], float]
    # Channels where the bot may not open threads: asked once, then left alone.
    _thread_refused: set[int] = field(default_factory=set, init=False)

    async def answer(self, job: Job, interaction: discord.Interaction[Any] | None = None) -> None:
        """A turn answered with channel messages, or in `/ask`'s deferred response (`interaction`) and
        its follow-ups, then channel messages once the token stops working; then the thread."""
        async with self._delivery(job), self.order.hold(job.key):
            if interaction is None and self.guard.blocked(job.channel_id):
                return
            # Its files are downloaded by this client, from what the delivery kept of them.
            incoming = job.incoming_on(self.client._connection)
            await self.run_turn(
                job, lambda progress: self.agent.reply(incoming, progress), interaction, self.records
            )
            if job.open_thread:
                await self.open_thread(job.channel_id, job.message_id, job.thread_name)

    async def run_turn(
        self,
        job: Job,
        turn: Turn,
        interaction: discord.Interaction[Any] | None = None,
        records: PostRecords | None = None,
        *,
        note: str = "",
    ) -> AgentReply:
        """Run `turn` with its live answer in `job`'s channel, then post its reply (or the approval
        message it waits on) there; `note` (nerve's own words) goes under the answer in small print.
        With `records`, a turn run again goes on in the messages of the run before (`TurnPages`).
        The caller holds the conversation's order."""
        in_guild = None if job.key.workspace == DM_WORKSPACE else int(job.key.workspace)
        channel = self.client.get_partial_messageable(job.channel_id, guild_id=in_guild)
        guild_id = interaction.guild_id if interaction else channel.guild.id if channel.guild else None
        reference = reply_reference(job.channel_id, job.message_id, guild_id) if job.message_id else None
        poster = ChannelPoster(channel, guard=self.guard, channel_id=job.channel_id, reference=reference)
        kept: TurnPages | None = None
        answer: Poster = poster
        pages: list[Page] = []
        if interaction is not None:
            answer = InteractionPoster(interaction, poster)
            pages = [InteractionPage(interaction)]
        elif records is not None:
            kept = answer = TurnPages(records, job.event_id, poster)
            pages = list(await kept.earlier_pages())
        live = LiveAnswer(answer, pages=pages, every=self.edit_every())
        links = TurnLinks(self.sign_ins, interaction)
        where = ChannelPoster(channel, guard=self.guard, channel_id=job.channel_id, reference=reference)
        progress = links.watch(self.inputs.sink(live.progress, where))
        async with typing(channel) if interaction is None else contextlib.nullcontext():
            try:
                reply = await turn(progress)
            except Exception:
                logger.exception("turn failed for %s", job.key)
                reply = AgentReply(text=APOLOGY, failed=True)
            finally:
                await live.stop()
        if reply.approval is not None:
            await self._show_approval(live, job, interaction, guild_id, reply, reply.approval)
        else:
            shown = replace(reply, text=f"{reply.text}\n-# {note}") if note else reply
            await live.deliver(*self._render(shown))
            files_to = poster if interaction is None else InteractionPoster(interaction, poster)
            if kept is None or (reply.attachments and await kept.take_files()):
                await post_files(files_to, reply.attachments)
                if kept is not None:
                    await kept.files_done()
        await links.flush()
        return reply

    async def _show_approval(
        self,
        live: LiveAnswer,
        job: Job,
        interaction: discord.Interaction[Any] | None,
        guild_id: int | None,
        reply: AgentReply,
        approval: ApprovalPrompt,
    ) -> None:
        """A parked turn's live answer becomes the approval message (one message either way), else a reply."""
        message_id = job.message_id
        if interaction is None:
            first = live.pages[0] if live.pages else None
            if isinstance(first, ChannelPage) and await self.approvals.show_in(
                first.message.edit, approval, job.channel_id, first.message.id
            ):
                await live.discard(keep=1)
                return
            await live.discard()
        else:
            await live.discard()
            if not message_id and not interaction.is_expired():
                message_id = await response_id(interaction) or 0
            shown = self.approvals.show_in
            if (
                message_id
                and not interaction.is_expired()
                and await shown(interaction.edit_original_response, approval, job.channel_id, message_id)
            ):
                return
        await self.post_reply(job.channel_id, guild_id, reply, message_id)

    async def post_reply(
        self, channel_id: int, guild_id: int | None, reply: AgentReply, reply_to: int | None = None
    ) -> bool:
        """Post a reply (or a parked turn's approval message) replying to `reply_to`; False if none went."""
        reference = reply_reference(channel_id, reply_to, guild_id) if reply_to else None
        channel = self.client.get_partial_messageable(channel_id, guild_id=guild_id)
        if reply.approval is not None:
            return await self.approvals.post_prompt(channel, channel_id, reply.approval, reference)
        # Posted in order, the first as a reply and the view on the last, up to the first failure.
        poster = ChannelPoster(channel, guard=self.guard, channel_id=channel_id, reference=reference)
        sent = LiveAnswer(poster)
        await sent.deliver(*self._render(reply))
        if sent.pages:
            await post_files(poster, reply.attachments)
        return bool(sent.pages)

    async def post_to_conversation(
        self, key: ConversationKey, reply: AgentReply, reply_to: int | None
    ) -> None:
        """Post a reply that comes after its turn in the conversation's thread or DM (else the channel)."""
        channel_id, guild_id = answer_channel(key)
        if await self.post_reply(channel_id, guild_id, reply, reply_to):
            return
        parent = int(key.channel)
        if guild_id is not None and parent != channel_id and not self.guard.blocked(parent):
            await self.post_reply(parent, guild_id, reply)

    def where_of(self, key: ConversationKey) -> ChannelPoster:
        """Where a conversation's later messages go (its thread or DM): a resumed turn's questions."""
        channel_id, guild_id = answer_channel(key)
        channel = self.client.get_partial_messageable(channel_id, guild_id=guild_id)
        return ChannelPoster(channel, guard=self.guard, channel_id=channel_id)

    def _render(self, reply: AgentReply) -> tuple[list[str], discord.ui.View | None]:
        view = results_button_view(self.results, reply.attachments) if reply.attachments else None
        if undo := undo_buttons(reply.remembered):
            view = view or view_of()
            for button in undo:
                view.add_item(button)
        return reply_chunks(reply), view

    async def open_thread(self, channel_id: int, message_id: int, text: str) -> bool:
        """Open the follow-up thread on the message whose id the conversation key already carries,
        named after `text`; whether the thread is there (opened now, or before)."""
        if channel_id in self._thread_refused or self.guard.blocked(channel_id):
            return False
        try:
            await self.client.http.start_thread_with_message(
                channel_id,
                message_id,
                name=truncate(" ".join(text.split()), 90)[0] or "nerve",
                auto_archive_duration=1440,
            )
        except discord.Forbidden as exc:
            self._thread_refused.add(channel_id)
            logger.warning(
                "cannot open threads in channel %s (403: %s); give the bot Create Public Threads there",
                channel_id,
                exc.text,
            )
            return False
        except discord.HTTPException as exc:
            # 160004: a thread already exists on that message (e.g. answered again after a restart).
            logger.info("no thread opened on message %s: %s %s", message_id, exc.status, exc.text)
            return exc.code == THREAD_EXISTS
        return True

    @contextlib.asynccontextmanager
    async def _delivery(self, job: Job) -> AsyncIterator[None]:
        """Log a failed delivery and mark it answered: only a shutdown leaves it for the restart."""
        try:
            yield
        except Exception:
            logger.exception("answering %s failed", job.event_id)
        try:
            await self.agent.inbox.finish_event(PLATFORM, job.event_id)
        except Exception:
            logger.exception("could not mark %s as answered", job.event_id)

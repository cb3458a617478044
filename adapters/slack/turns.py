"""One Slack turn from start to finish: progress, the agent's answer, delivery, the inbox entry.

Whatever goes wrong, the user gets one short, true sentence in the thread and the operator the
traceback in the log. A turn that waits for a person ends with one approval message; once decided (in
any process, even after a restart) `resume` answers in its thread, then the messages that waited.

A turn cut off by a shutdown before its answer's first message went out stays unfinished, and the next
start answers it once; once part of the answer is out it counts as answered: posting it again would be
the double reply people hate most.

👀 on the person's post is the sign a mention was taken: Slack paces posts per channel, so in a busy
channel a status message shows up late and takes an answer's slot, while reactions are limited per
workspace. It goes once the answer is posted; a workspace that refuses reactions is asked no more.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.common.refs import message_ref
from adapters.slack.approval_view import approval_message, argument_uploads
from adapters.slack.client import TeamEntry, no_team
from adapters.slack.events import PLATFORM, Turn, turn_in
from adapters.slack.files import SlackFiles
from adapters.slack.live import UNSUPPORTED, StreamedAnswer
from adapters.slack.post import LIVE, REFUSED_BLOCKS, Poster, PostsStopped, TurnPosts, answer_part, api_error
from adapters.slack.progress import AssistantStatus, OpeningProgress, ProgressSink, StatusMessage
from adapters.slack.render import OutMessage, RenderedReply, plain_message, render_reply
from adapters.slack.seen import SeenMarks
from adapters.slack.sessions import AgentSessions
from adapters.slack.stops import Stopped, Stops
from adapters.slack.zones import UserZones
from bot.agent import Agent, PostRecords
from bot.types import AgentReply, Ask, ConversationKey, Incoming, Progress, TurnEvent

logger = logging.getLogger(__name__)
# Wraps a turn's progress sink (`adapters.slack.sign_in`): what it shows besides the live message.
Watch = Callable[[Turn, Progress], Progress]
# What answers a turn, given its progress: the agent's reply to the person's message, or a due
# schedule's run (`adapters.slack.schedules`).
Answer = Callable[[Progress], Awaitable[AgentReply]]

APOLOGY = "Sorry — something went wrong on my side while answering; please try again."
RESET_DONE = "Started a new conversation here: I have forgotten what we said before."
EMPTY_PROMPT = "Hi! Ask me something — for example, which tools I have."
CUT_OFF_BY_RESTART = "⏳ nerve restarted while answering; the answer follows here once it is back."
STOPPED = "⏹️ Stopped. Your message is kept; ask again to retry."
# Stopped while it waited for a free slot: nothing was stored, and nothing answers it later.
STOPPED_UNSTARTED = "⏹️ Stopped before I started on it: your message was not kept; send it again to ask."
# Seconds a cut-off turn may take to say so in its live message, during a shutdown.
NOTE_SECONDS = 3.0


@dataclass(eq=False)
class TurnRunner:
    """Answers turns for one bot: shares the poster (pacing, fallbacks) across all of them."""

    agent: Agent
    poster: Poster
    _: KW_ONLY
    status_interval: float
    stream_interval: float = 0.4
    feedback: bool = False
    # Sees each turn's events before its sink: sign-in links go to their person alone.
    watch: Watch
    # The zone each person's profile names, for their turns (none asked without it).
    zones: UserZones | None = None
    # Reads the files shared with a post (without it, a turn carries none).
    files: SlackFiles | None = None
    # The threads' agent sessions (Agent messaging experience); off, nothing is set.
    sessions: AgentSessions | None = None
    # Where work for a workspace runs with that workspace's token (installs in many workspaces).
    enter: TeamEntry = no_team
    # Who may stop anyone's turn (NERVE_ADMINS); everyone else stops only their own.
    admins: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.stops = Stops(self.admins, self.agent.stop_board)
        self._seen = SeenMarks(self.poster.client)
        # What each turn posted, so a turn answered again edits or skips it (`adapters.slack.post`).
        inbox = self.agent.inbox
        self._records = inbox if isinstance(inbox, PostRecords) else None
        # The turns whose answer is going out: a shutdown lets them finish the call on its way.
        self.delivering: set[asyncio.Task[Any]] = set()
        # Turns of each thread in this process, running or waiting for the one before them.
        self._active: Counter[ConversationKey] = Counter()

    async def run(self, turn: Turn) -> None:
        """Answer `turn`, then mark its event finished; an apology is an answer too."""
        await self.answer(turn)

    async def answer(self, turn: Turn, answer: Answer | None = None) -> AgentReply | None:
        """Answer `turn` as `run` does, by `answer` when given (a scheduled run, which has no inbox
        entry); the reply delivered, or None when an apology or nothing was posted instead."""
        self._active[turn.key] += 1
        try:
            async with self.enter(turn.key.workspace):
                return await self._run(turn, answer, behind=self._active[turn.key] > 1)
        finally:
            self._active -= Counter([turn.key])  # a thread with none left is dropped

    async def _run(self, turn: Turn, answer: Answer | None, *, behind: bool) -> AgentReply | None:
        reply: AgentReply | None = None
        sink: OpeningProgress | None = None
        mark = None
        posts = TurnPosts(self._records, self.poster, turn)
        task = asyncio.current_task()
        assert task is not None, "a turn runs in a task of its own"
        try:
            await posts.load()
            if turn.kind == "reset":
                await self.agent.reset(turn.key)
                await posts.put(answer_part(0), plain_message(RESET_DONE))
                if self.sessions is not None:
                    await self.sessions.set(turn, "closed")  # the person ended this conversation
            elif not turn.incoming.text and not turn.files:
                await posts.put(answer_part(0), plain_message(EMPTY_PROMPT))
            else:
                mark = self._seen.mark(turn)
                if answer is None and self.sessions is not None:
                    await self.sessions.start(turn)
                # Behind another turn of its thread, the live message waits until this turn starts.
                sink = OpeningProgress(
                    self.poster, turn, lambda: self._open_live(turn, posts), at_once=not behind
                )
                progress = self.watch(turn, sink.on_event)
                try:
                    work: Awaitable[AgentReply]
                    if answer is None:
                        work = self.agent.reply(await self._incoming(turn), progress)
                    else:
                        work = answer(progress)
                    reply = await self.stops.run(turn.key, work, turn.incoming.user_id)
                finally:
                    await sink.close()
                self.delivering.add(task)
                await self._deliver(turn, reply, sink, posts)
                if answer is None and self.sessions is not None:
                    await self.sessions.answered(turn, reply, first=turn.reply_thread_ts == turn.message_ts)
        except asyncio.CancelledError:
            self.delivering.discard(task)
            await self._cut_off(turn, None if posts.delivered else sink)
            raise
        except PostsStopped:
            if not posts.delivered:
                self.delivering.discard(task)
                await self._cut_off(turn, sink)
                return None
            logger.warning("Slack event %s: the rest of its answer was not posted (shutdown)", turn.event_id)
        except Stopped:
            logger.info("Slack event %s in %s: stopped by its person", turn.event_id, turn.key)
            kept = answer is not None or await self._kept(turn)  # a scheduled run has no message
            await self._apologize(turn, sink, STOPPED if kept else STOPPED_UNSTARTED)
            await self.session_idle(turn)
        except Exception:
            logger.exception("answering Slack event %s in %s failed", turn.event_id, turn.key)
            await self._apologize(turn, sink)
            await self.session_idle(turn)
            reply = None
        if answer is not None:
            self.delivering.discard(task)
            return reply
        try:
            await self.agent.inbox.finish_event(PLATFORM, turn.event_id)
        except Exception:
            logger.exception("could not mark Slack event %s finished", turn.event_id)
            return reply
        finally:
            self.delivering.discard(task)
        logger.info("finished Slack event %s", turn.event_id)
        if mark is not None:
            await self._seen.clear(turn, mark)
        return reply

    async def _kept(self, turn: Turn) -> bool:
        """Whether a stopped turn's message is stored: one stopped while it waited for a free slot
        is not (a store that cannot tell counts it kept, as it is once the turn began)."""
        try:
            return await self.agent.message_kept(turn.key, turn.event_id)
        except Exception as exc:
            logger.info(
                "could not tell whether the message of Slack event %s is kept: %s", turn.event_id, exc
            )
            return True

    async def session_idle(self, turn: Turn) -> None:
        """The turn ended without an answer (stopped, failed): its session no longer shows it working."""
        if self.sessions is not None:
            await self.sessions.set(turn, "active")

    async def _incoming(self, turn: Turn) -> Incoming:
        """The person's message with the zone their profile names, when it names one, and the files
        shared with it (described by files.info when the event named them only by id)."""
        incoming = turn.incoming
        zone = await self.zones.of(incoming.user_id) if self.zones is not None else None
        if zone:
            incoming = replace(incoming, time_zone=zone)
        if turn.files and self.files is not None:
            incoming = replace(incoming, files=await self.files.shared(turn.files))
        return incoming

    async def _cut_off(self, turn: Turn, sink: OpeningProgress | None) -> None:
        """Its event stays unfinished for the next start; its live message says so (best effort)."""
        logger.warning(
            "Slack event %s in %s was cut off by the shutdown; the next start answers it",
            turn.event_id,
            turn.key,
        )
        if sink is None:
            return
        try:
            async with asyncio.timeout(NOTE_SECONDS):
                await sink.close()
                if sink.message_ts is not None:
                    await self._apologize(turn, sink, CUT_OFF_BY_RESTART)
        except (Exception, TimeoutError) as exc:
            logger.info("could not say in %s that the answer comes after the restart: %s", turn.key, exc)

    async def resume(self, request_id: str) -> None:
        """Go on with a decided (or expired) request, unless another process took it already."""
        found = await self.agent.parked(request_id)
        if found is None:
            return
        prompt = found[0]
        async with self.enter(prompt.key.workspace):
            await self._resume(request_id, prompt.key, prompt.requester)

    async def _resume(self, request_id: str, key: ConversationKey, requester: str) -> None:
        turn = turn_in(Incoming(key=key, text="", user_id=requester))
        sink = self._later(turn)
        try:
            try:
                progress = self._working(turn, self.watch(turn, sink.on_event))
                final = await self.stops.run(turn.key, self.agent.resume(request_id, progress), requester)
            finally:
                await sink.close()
            if final is None:
                return
            await self._deliver(turn, final, sink)
            if self.sessions is not None:
                await self.sessions.answered(turn, final, first=False)
        except Stopped:
            await self._apologize(turn, sink, STOPPED)
            await self.session_idle(turn)
            return
        except Exception:
            logger.exception("resuming approval request %s in %s failed", request_id, key)
            await self._apologize(turn, sink)
            await self.session_idle(turn)
            return
        await self.answer_deferred(key)

    def _working(self, turn: Turn, progress: Progress) -> Progress:
        """`progress` that first shows the session `processing`: a resumed turn's events come only once
        this process claimed it, so a request another process took leaves that process's status be."""
        sessions = self.sessions
        if sessions is None:
            return progress
        shown = False

        async def on_event(event: TurnEvent) -> None:
            nonlocal shown
            if not shown:
                shown = True
                await sessions.set(turn, "processing")  # the parked turn works again
            await progress(event)

        return on_event

    async def answer_deferred(self, key: ConversationKey) -> None:
        """Answer, in order, the messages written in this thread while its turn waited."""
        async with self.enter(key.workspace):
            await self._answer_deferred(key)

    async def _answer_deferred(self, key: ConversationKey) -> None:
        sink = self._later(turn_in(Incoming(key=key, text="", user_id="")))

        async def progress(event: TurnEvent) -> None:
            await self.watch(sink.turn, sink.on_event)(event)

        try:
            async for incoming, reply in self.agent.deferred_replies(key, progress):
                await sink.close()
                await self._deliver(turn_in(incoming), reply, sink)
                sink = self._later(turn_in(incoming))
        except Exception:
            logger.exception("answering the messages that waited in %s failed", key)
            await self._apologize(sink.turn, sink)
        finally:
            await sink.close()

    def _later(self, turn: Turn) -> OpeningProgress:
        """Shown only once the turn starts: a request another process took posts nothing."""
        return OpeningProgress(self.poster, turn, lambda: self.open_progress(turn), at_once=False)

    async def _open_live(self, turn: Turn, posts: TurnPosts) -> ProgressSink | None:
        """The live message an earlier run of this turn left, else a new one where the channel has
        room; None once part of the answer is out (a live message under it reads as a second answer)."""
        if posts.answered:
            return None
        ts = await posts.landed(LIVE)
        if ts is not None:
            return await self._reopen(turn, ts)
        if not turn.assistant_thread and self.poster.busy(turn.channel):
            # A status post would take the slot of an answer and show up late anyway (👀 is the sign
            # meanwhile); an assistant thread's status line is no post: it always shows.
            return None
        sink = await self.open_progress(turn, metadata=await posts.intend_live())
        await posts.note_live(sink.message_ts)
        return sink

    async def _reopen(self, turn: Turn, ts: str) -> ProgressSink:
        """Go on in an earlier run's live message, stopping its stream (Slack edits no streaming message)."""
        try:
            await self.poster.client.chat_stopStream(channel=turn.channel, ts=ts)
        except SlackApiError as exc:
            logger.debug("the earlier live message in %s takes no stop (%s)", turn.key, api_error(exc))
        message = StatusMessage(self.poster, turn, self.status_interval)
        message.adopt(ts)
        return message

    async def open_progress(self, turn: Turn, *, metadata: dict[str, Any] | None = None) -> ProgressSink:
        """Streamed where Slack can, else one message edited in place; in an assistant thread the
        status line shows until the first words. `metadata` goes on a posted live message only."""
        team = turn.key.workspace
        thread = turn.reply_thread_ts
        streaming = thread is not None and team not in self.poster.no_streams
        status: AssistantStatus | None = None
        if turn.assistant_thread and thread is not None and not (self.sessions and self.sessions.enabled):
            status = AssistantStatus(self.poster, turn.channel, thread, self.status_interval)
            try:
                await status.start()
            except SlackApiError as exc:
                # Not an assistant container after all (or the feature is off): use a message.
                logger.info("assistant status unavailable (%s); using a status message", api_error(exc))
                status = None
            if status is not None and not streaming:
                return status
        if streaming:
            live = StreamedAnswer(
                self.poster,
                turn,
                interval=self.stream_interval,
                edit_interval=self.status_interval,
                status=status,
                feedback=self.feedback,
            )
            if status is not None:
                return live  # the stream starts with the first words; the status line shows until then
            try:
                await live.start()
                return live
            except SlackApiError as exc:
                error = api_error(exc)
                if error in UNSUPPORTED:
                    self.poster.refuse_streams(team)
                logger.info("no streaming message in %s (%s); editing a message instead", turn.key, error)
        message = StatusMessage(self.poster, turn, self.status_interval)
        await message.start(metadata=metadata)
        return message

    async def _deliver(
        self, turn: Turn, reply: AgentReply, sink: OpeningProgress, posts: TurnPosts | None = None
    ) -> None:
        """Post the answer, its first message in place of the live message; with a turn's `posts`, each
        message once per turn (`TurnPosts`)."""
        posts = posts or TurnPosts(None, self.poster, turn)
        team = turn.key.workspace
        concluded = await sink.conclude(reply, self.poster.level(team))
        await posts.note_live(sink.message_ts)
        if concluded.delivered and sink.message_ts is not None:
            # The live message is the answer's first message already (it showed it word for word,
            # or its stream ended with it): kept as that part, or a second run would post it again.
            await posts.record(answer_part(0), sink.message_ts)
        level = self.poster.level(team)
        # A streamed answer rewritten in place keeps its feedback buttons.
        rendered = render_reply(
            reply, level, feedback=turn.event_id if concluded.feedback else None, undo=True
        )
        posts.delivered = concluded.delivered
        while (sent := posts.delivered) < len(rendered.messages):
            try:
                await posts.put(
                    answer_part(sent), rendered.messages[sent], sink.message_ts if sent == 0 else None
                )
            except SlackApiError as exc:
                lower = self.poster.downgrade(team, level) if api_error(exc) in REFUSED_BLOCKS else None
                if lower is None:
                    raise
                # The reply at the lower level; messages already delivered are not sent again.
                again = render_reply(reply, lower, undo=True)
                keep = again.messages[sent:] or again.messages[-1:]
                level = lower
                rendered = RenderedReply(messages=[OutMessage(text="")] * sent + keep, uploads=again.uploads)
                continue
            posts.delivered += 1
        # Files go up after the messages they belong to, once: a failed one is a note, never a lost
        # answer or an apology.
        if rendered.uploads and await posts.take_files():
            await self.poster.upload_all(turn.channel, turn.reply_thread_ts, rendered.uploads)
            await posts.files_done()
        prompt = reply.approval
        if prompt is not None and prompt.message_ref is None:
            # The one approval message of a parked turn, unless it was posted already.
            ts = await self.poster.post(turn.channel, turn.reply_thread_ts, approval_message(prompt))
            await self.agent.ask_posted(Ask.of_approval(prompt), message_ref(turn.channel, ts))
            await self.poster.upload_all(turn.channel, turn.reply_thread_ts, argument_uploads(prompt))

    async def _apologize(self, turn: Turn, sink: OpeningProgress | None, text: str = APOLOGY) -> None:
        try:
            if sink is not None and isinstance(sink.live, StreamedAnswer):
                # A stream is stopped with the apology (or rewritten to it), never left hanging.
                await self._deliver(turn, AgentReply(text=text, failed=True), sink)
                return
            ts = sink.message_ts if sink is not None else None
            await TurnPosts(None, self.poster, turn).put("", plain_message(text), ts)
        except PostsStopped:
            logger.info("no note for Slack event %s: nerve is shutting down", turn.event_id)
        except Exception:
            logger.exception("could not post the apology for Slack event %s", turn.event_id)

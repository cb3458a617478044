"""One Slack turn from start to finish: progress, the agent's answer, delivery, the inbox entry.

Runs in the background after the event was acked. Whatever goes wrong, the user gets one short,
true sentence in the thread and the operator gets the traceback in the log, never the reverse.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from adapters.slack.events import PLATFORM, Turn
from adapters.slack.post import REFUSED_BLOCKS, Poster, api_error
from adapters.slack.progress import AssistantStatus, ProgressSink, StatusMessage
from adapters.slack.render import Level, OutMessage, RenderedReply, plain_message, render_reply
from bot.agent import Agent
from bot.types import AgentReply

logger = logging.getLogger(__name__)

APOLOGY = "Sorry — something went wrong on my side while answering; please try again."
RESET_DONE = "Started a new conversation here: I have forgotten what we said before."
EMPTY_PROMPT = "Hi! Ask me something — for example, which tools I have."


class TurnRunner:
    """Answers turns for one bot: shares the poster (pacing, fallbacks) across all of them."""

    def __init__(self, agent: Agent, poster: Poster, *, status_interval: float) -> None:
        self._agent = agent
        self._poster = poster
        self._status_interval = status_interval

    async def run(self, turn: Turn) -> None:
        """Answer `turn`, then mark its event finished; an apology is an answer too."""
        sink: ProgressSink | None = None
        try:
            if turn.kind == "reset":
                await self._agent.reset(turn.key)
                await self._poster.post(turn.channel, turn.reply_thread_ts, plain_message(RESET_DONE))
            elif not turn.incoming.text:
                await self._poster.post(turn.channel, turn.reply_thread_ts, plain_message(EMPTY_PROMPT))
            else:
                sink = await self._open_progress(turn)
                try:
                    reply = await self._agent.reply(turn.incoming, sink.on_event)
                finally:
                    await sink.close()
                await self._deliver(turn, reply, sink.message_ts)
        except Exception:
            logger.exception("answering Slack event %s in %s failed", turn.event_id, turn.key)
            await self._apologize(turn, sink.message_ts if sink else None)
        try:
            await self._agent.inbox.finish_event(PLATFORM, turn.event_id)
        except Exception:
            logger.exception("could not mark Slack event %s finished", turn.event_id)

    async def _open_progress(self, turn: Turn) -> ProgressSink:
        if turn.assistant_thread and turn.reply_thread_ts is not None:
            status = AssistantStatus(self._poster, turn.channel, turn.reply_thread_ts, self._status_interval)
            try:
                await status.start()
                return status
            except SlackApiError as exc:
                # Not an assistant container after all (or the feature is off): use a message.
                logger.info("assistant status unavailable (%s); using a status message", api_error(exc))
        message = StatusMessage(
            self._poster, turn.key.workspace, turn.channel, turn.reply_thread_ts, self._status_interval
        )
        await message.start()
        return message

    async def _deliver(self, turn: Turn, reply: AgentReply, replace_ts: str | None) -> None:
        team = turn.key.workspace
        level = self._poster.level(team)
        rendered = render_reply(reply, level)
        sent = 0
        while sent < len(rendered.messages):
            message = rendered.messages[sent]
            try:
                await self._send(turn, message, replace_ts if sent == 0 else None)
            except SlackApiError as exc:
                lower = self._poster.downgrade(team, level) if api_error(exc) in REFUSED_BLOCKS else None
                if lower is None:
                    raise
                level, rendered = lower, self._rerender(reply, lower, sent)
                continue
            sent += 1
        for upload in rendered.uploads:
            try:
                await self._poster.upload(turn.channel, turn.reply_thread_ts, upload)
            except SlackApiError as exc:
                logger.warning("could not upload %s to %s: %s", upload.filename, turn.channel, api_error(exc))

    @staticmethod
    def _rerender(reply: AgentReply, level: Level, sent: int) -> RenderedReply:
        """The reply at a lower level; messages already delivered are not sent again."""
        again = render_reply(reply, level)
        keep = again.messages[sent:] or again.messages[-1:]
        return RenderedReply(messages=[OutMessage(text="")] * sent + keep, uploads=again.uploads)

    async def _send(self, turn: Turn, message: OutMessage, replace_ts: str | None) -> None:
        if replace_ts is not None:
            await self._poster.update(turn.channel, replace_ts, message)
        else:
            await self._poster.post(turn.channel, turn.reply_thread_ts, message)

    async def _apologize(self, turn: Turn, status_ts: str | None) -> None:
        try:
            await self._send(turn, plain_message(APOLOGY), status_ts)
        except Exception:
            logger.exception("could not post the apology for Slack event %s", turn.event_id)

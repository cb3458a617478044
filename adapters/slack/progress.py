"""Showing a turn's progress: the assistant thread's status line, or one live message edited in place
(`adapters.slack.live` streams where the workspace can), opened beside the model's work.

Best effort and throttled (latest state wins): a failed update is logged, never fails the turn. The
live message is a post paced per channel, so it opens in the background and replays what happened
before it; in a busy channel none opens until there is room (the 👀 is the sign meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from slack_sdk.errors import SlackApiError

from adapters.common.throttle import Throttle
from adapters.common.turn_so_far import TurnSoFar, percent
from adapters.slack.events import Turn
from adapters.slack.inputs import InputPosts
from adapters.slack.post import REFUSED_BLOCKS, Poster, PostsStopped, api_error
from adapters.slack.render import Level, OutMessage, render_reply, status_message
from bot.text import truncate
from bot.types import AgentReply, TurnEvent

logger = logging.getLogger(__name__)
T = TypeVar("T")
# Events that show after SOON rather than the whole interval: a wait is stale once it is over.
URGENT = frozenset({"retrying", "notice"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Concluded:
    """What a live message did with the final answer: the messages it delivered, feedback kept or not."""

    delivered: int = 0
    feedback: bool = False


class ProgressSink(Protocol):
    """Where a turn's progress shows; `message_ts` is the live message the answer replaces, if any."""

    @property
    def message_ts(self) -> str | None: ...

    async def on_event(self, event: TurnEvent) -> None: ...

    async def close(self) -> None: ...

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded: ...


def _logged(send: Callable[[T], Awaitable[None]]) -> Callable[[T], Awaitable[None]]:
    """`send` for a throttle: an update Slack refuses is logged, never fails the turn."""

    async def logged(payload: T) -> None:
        try:
            await send(payload)
        except SlackApiError as exc:
            logger.warning("progress update failed: %s", api_error(exc) or exc)

    return logged


def tool_progress_text(event: TurnEvent) -> str:
    """A running call's reported progress: the server's message and how far along it is."""
    return truncate(f"{event.message}{percent(event.fraction)}", 200)[0]


def _headline(event: TurnEvent) -> str | None:
    if event.kind == "thinking":
        return "Thinking…"
    if event.kind == "tool_started" and event.tool:
        return f"Calling {event.tool}…"
    if event.kind == "tool_progress" and event.tool:
        return f"Calling {event.tool}… {tool_progress_text(event)}"
    if event.kind in ("retrying", "notice"):
        return truncate(event.message, 200)[0]
    return None


class AssistantStatus:
    """The assistant container's native status line ("is thinking…", "calling get_weather…")."""

    message_ts: str | None = None

    def __init__(self, poster: Poster, channel: str, thread_ts: str, interval: float) -> None:
        self._poster = poster
        self._channel = channel
        self._thread_ts = thread_ts
        self._status = "is thinking…"
        self._sent: str | None = None
        self._throttle = Throttle(lambda: self._status, _logged(self._send), interval)

    async def start(self) -> None:
        """Show "is thinking…"; raises SlackApiError when this is not an assistant thread."""
        await self._send(self._status)
        self._throttle.mark_sent()

    async def _send(self, status: str) -> None:
        await self._poster.client.assistant_threads_setStatus(
            channel_id=self._channel, thread_ts=self._thread_ts, status=status
        )
        self._sent = status

    async def on_event(self, event: TurnEvent) -> None:
        # The status line's words are the live message's headline, lower case ("calling …"), but no notice.
        if event.kind == "notice" or (headline := _headline(event)) is None:
            return
        if event.kind.startswith("tool_"):
            headline = "c" + headline[1:]
        self._status = "is thinking…" if event.kind == "thinking" else truncate(headline, 100)[0]
        if self._status != self._sent:
            self._throttle.request()

    def stop(self) -> None:
        """The answer is showing: no later status may cover it."""
        self._throttle.stop()

    async def close(self) -> None:
        # Slack clears the status when our reply lands; only stop pending updates here.
        await self._throttle.close()

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded:
        return Concluded()


class StatusMessage:
    """ONE message in the thread, edited as tools run and words arrive, replaced by the answer."""

    def __init__(self, poster: Poster, turn: Turn, interval: float) -> None:
        self._poster = poster
        self._turn = turn
        self._headline = "Thinking…"
        self._so_far = TurnSoFar()
        self._shown: OutMessage | None = None
        self._throttle = Throttle(self._render, _logged(self._send_update), interval)
        self.message_ts: str | None = None

    def _render(self) -> OutMessage:
        rich = self._turn.key.workspace not in self._poster.plain_status
        return status_message(
            self._headline, list(self._so_far.calls.values()), rich=rich, text=self._so_far.text
        )

    async def start(self, *, metadata: dict[str, Any] | None = None) -> None:
        async def post(message: OutMessage) -> None:
            self.message_ts = await self._poster.post(
                self._turn.channel, self._turn.reply_thread_ts, message, metadata=metadata
            )

        await self._show(post)
        self._throttle.mark_sent()

    async def _show(
        self, send: Callable[[OutMessage], Awaitable[None]], message: OutMessage | None = None
    ) -> None:
        """Send the message as it stands, with task cards until the workspace refuses them."""
        message = message or self._render()
        try:
            await send(message)
        except SlackApiError as exc:
            if api_error(exc) not in REFUSED_BLOCKS or self._turn.key.workspace in self._poster.plain_status:
                raise
            self._poster.plain_status.add(self._turn.key.workspace)
            message = self._render()
            await send(message)
        self._shown = message

    def adopt(self, ts: str) -> None:
        """Go on in a message that already exists (a stream Slack stopped taking)."""
        self.message_ts = ts
        self._throttle.request()

    async def _send_update(self, message: OutMessage) -> None:
        if self.message_ts is None or message == self._shown:
            return
        ts = self.message_ts
        await self._show(lambda shown: self._poster.update(self._turn.channel, ts, shown), message)

    def record(self, event: TurnEvent) -> None:
        """Take `event` into what the message shows, sending nothing (also before `start` or `adopt`)."""
        headline = _headline(event)
        if headline is not None:
            self._headline = headline
        self._so_far.record(event, time.monotonic())

    async def on_event(self, event: TurnEvent) -> None:
        first_words = event.kind == "text" and not self._so_far.text.strip()
        self.record(event)
        if event.kind == "text":
            # The first words of a round show as soon as the last edit is SOON old: Slack's
            # per-minute limit takes one early edit, and people see the answer start at once.
            self._throttle.request(soon=first_words and bool(self._so_far.text.strip()))
        elif self._render() != self._shown:
            # A wait ("retrying in 2 s") is news only while it lasts: shown as soon as an edit may go.
            self._throttle.request(soon=event.kind in URGENT)

    async def close(self) -> None:
        await self._throttle.close()

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded:
        """The answer replaces this message, unless the message already shows exactly the answer."""
        rendered = render_reply(reply, level, undo=True)
        if self._shown is not None and self.message_ts is not None and not rendered.uploads:
            head = rendered.messages[0]
            same = OutMessage(text=head.text, blocks=head.blocks or [], attachments=head.attachments or None)
            if same == self._shown:
                return Concluded(delivered=1)
        return Concluded()


# Seconds between two attempts to open a live message in a busy channel.
REOPEN_SECONDS = 2.0

# Opens the live message, or returns None when the channel is too busy for one right now.
OpenSink = Callable[[], Awaitable[ProgressSink | None]]


class OpeningProgress:
    """Progress whose live message comes later, or never: the events wait until it exists."""

    live: ProgressSink | None = None  # the live message, once it shows

    @property
    def message_ts(self) -> str | None:
        return self.live.message_ts if self.live is not None else None

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded:
        return await self.live.conclude(reply, level) if self.live is not None else Concluded()

    def __init__(self, poster: Poster, turn: Turn, open_sink: OpenSink, *, at_once: bool = True) -> None:
        self.turn = turn
        self._open_sink = open_sink
        # Requests for input are messages of their own in the thread, never part of the live message.
        self._inputs = InputPosts(poster, turn.channel, turn.reply_thread_ts)
        self._waiting: list[TurnEvent] = []  # what happened before the live message showed
        self._closed = False
        self._tried = time.monotonic()
        # Now, or with the first event when the turn waits behind another turn of its thread.
        self._opening: asyncio.Task[None] | None = asyncio.create_task(self._open()) if at_once else None
        # Another try once the channel may have room again, while something waits to be shown.
        self._retry: asyncio.Task[None] | None = None

    async def _open(self) -> None:
        try:
            sink = await self._open_sink()
        except (SlackApiError, PostsStopped) as exc:
            reason = api_error(exc) if isinstance(exc, SlackApiError) else str(exc)
            logger.info("no live message in %s: %s", self.turn.key, reason or exc)
            return
        except Exception as exc:  # the sign is best effort: the answer still comes
            logger.warning("no live message in %s: %s", self.turn.key, type(exc).__name__)
            return
        if sink is None:
            if self._waiting and not self._closed and (self._retry is None or self._retry.done()):
                # A turn waiting in line has no next event to try again with: try by itself.
                self._retry = asyncio.create_task(self._open_later())
            return
        try:
            # In order, including what arrives while these are being shown (a list's iterator sees it).
            for event in self._waiting:
                await sink.on_event(event)
        except Exception:
            logger.exception("showing the progress so far in %s failed", self.turn.key)
        self._waiting.clear()
        self.live = sink

    async def _open_later(self) -> None:
        await asyncio.sleep(REOPEN_SECONDS)
        if self.live is None and not self._closed and (self._opening is None or self._opening.done()):
            self._tried = time.monotonic()
            self._opening = asyncio.create_task(self._open())

    async def on_event(self, event: TurnEvent) -> None:
        # A question never waits for the live message: that may never show, and its person would not know.
        if self._inputs.take(event):
            return
        if self.live is not None:
            await self.live.on_event(event)
            return
        self._waiting.append(event)
        now = time.monotonic()
        if self._closed:
            return
        if self._opening is None or (self._opening.done() and now - self._tried >= REOPEN_SECONDS):
            self._tried = now
            self._opening = asyncio.create_task(self._open())

    async def close(self) -> None:
        """No more opening; a live message on its way is waited for, so the answer can replace it."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        if self._opening is not None and not self._opening.done():
            # Shielded: a status post already on its way lands, and is then known (and replaced).
            await asyncio.shield(self._opening)
        if self.live is not None:
            await self.live.close()
        await self._inputs.close()

"""Showing a turn's progress: assistant.threads.setStatus, or one status message updated in place.

Progress is best-effort: a failed status update is logged and never fails the turn. Updates are
throttled (latest state wins) so a burst of tool calls costs one chat.update per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from slack_sdk.errors import SlackApiError

from adapters.slack.post import REFUSED_BLOCKS, Poster, api_error
from adapters.slack.render import OutMessage, ToolState, status_message
from bot.render import truncate
from bot.types import TurnEvent

logger = logging.getLogger(__name__)


class ProgressSink(Protocol):
    """Where a turn's progress shows; `message_ts` is the status message the answer replaces, if any."""

    message_ts: str | None

    async def on_event(self, event: TurnEvent) -> None: ...

    async def close(self) -> None: ...


class Throttle:
    """Runs `send` at most once per `interval`; requests in between coalesce into one later send."""

    def __init__(self, send: Callable[[], Awaitable[None]], interval: float) -> None:
        self._send = send
        self._interval = interval
        self._last = -1e9
        self._pending: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    def mark_sent(self) -> None:
        """Count a send made outside the throttle (the initial post) towards the interval."""
        self._last = time.monotonic()

    async def request(self) -> None:
        if self._closed or self._pending is not None:
            return  # the scheduled send will carry the latest state
        wait = self._last + self._interval - time.monotonic()
        if wait <= 0:
            await self._flush()
        else:
            self._pending = asyncio.create_task(self._later(wait))

    async def _later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._pending = None
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._last = time.monotonic()
            try:
                await self._send()
            except SlackApiError as exc:
                logger.warning("progress update failed: %s", api_error(exc) or exc)

    async def close(self) -> None:
        """Drop any pending send and wait for one in flight, so nothing overwrites what comes next."""
        self._closed = True
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending
            self._pending = None
        async with self._lock:
            pass


def _headline(event: TurnEvent) -> str | None:
    if event.kind == "thinking":
        return "Thinking…"
    if event.kind == "tool_started" and event.tool:
        return f"Calling {event.tool}…"
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
        self._throttle = Throttle(self._send, interval)

    async def start(self) -> None:
        """Show "is thinking…"; raises SlackApiError when this is not an assistant thread."""
        await self._send()
        self._throttle.mark_sent()

    async def _send(self) -> None:
        status = self._status
        await self._poster.client.assistant_threads_setStatus(
            channel_id=self._channel, thread_ts=self._thread_ts, status=status
        )
        self._sent = status

    async def on_event(self, event: TurnEvent) -> None:
        if event.kind == "tool_started" and event.tool:
            self._status = f"calling {event.tool}…"
        elif event.kind == "thinking":
            self._status = "is thinking…"
        elif event.kind == "retrying":
            self._status = truncate(event.message, 100)[0]
        else:
            return
        if self._status != self._sent:
            await self._throttle.request()

    async def close(self) -> None:
        # Slack clears the status when our reply lands; only stop pending updates here.
        await self._throttle.close()


class StatusMessage:
    """ONE message in the thread, posted at the start, edited per tool call, replaced by the answer."""

    def __init__(
        self, poster: Poster, team: str, channel: str, thread_ts: str | None, interval: float
    ) -> None:
        self._poster = poster
        self._team = team
        self._channel = channel
        self._thread_ts = thread_ts
        self._headline = "Thinking…"
        self._tools: list[ToolState] = []
        self._shown: OutMessage | None = None
        self._throttle = Throttle(self._send_update, interval)
        self.message_ts: str | None = None

    def _render(self) -> OutMessage:
        return status_message(self._headline, self._tools, rich=self._poster.rich_status(self._team))

    async def start(self) -> None:
        """Post the status message (task-card style where the workspace accepts it)."""
        self._shown = self._render()
        try:
            self.message_ts = await self._poster.post(self._channel, self._thread_ts, self._shown)
        except SlackApiError as exc:
            if api_error(exc) not in REFUSED_BLOCKS or not self._poster.rich_status(self._team):
                raise
            self._poster.refuse_rich_status(self._team)
            self._shown = self._render()
            self.message_ts = await self._poster.post(self._channel, self._thread_ts, self._shown)
        self._throttle.mark_sent()

    async def _send_update(self) -> None:
        message = self._render()
        if self.message_ts is None or message == self._shown:
            return
        try:
            await self._poster.update(self._channel, self.message_ts, message)
        except SlackApiError as exc:
            if api_error(exc) not in REFUSED_BLOCKS or not self._poster.rich_status(self._team):
                raise
            self._poster.refuse_rich_status(self._team)
            message = self._render()
            await self._poster.update(self._channel, self.message_ts, message)
        self._shown = message

    async def on_event(self, event: TurnEvent) -> None:
        headline = _headline(event)
        if headline is not None:
            self._headline = headline
        if event.kind == "tool_started" and event.tool:
            self._tools.append(ToolState(call_id=event.tool_call_id or "", name=event.tool))
        elif event.kind == "tool_finished":
            for tool in self._tools:
                if tool.call_id == (event.tool_call_id or "") and tool.state == "running":
                    tool.state = "ok" if event.ok else "error"
                    break
        if self._render() != self._shown:
            await self._throttle.request()

    async def close(self) -> None:
        await self._throttle.close()

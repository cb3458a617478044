"""A turn's live message opened beside the model's work, never in front of it.

Posting the status message (or starting the stream) is a Slack call paced per channel; in a busy
channel it could wait a long time for its slot. So the model starts at once and the live message
opens in the background: what happens before it shows is kept and shown as soon as it does. Where
the channel is busy, no live message is opened at all (the 👀 on the person's post is the sign,
and the slot goes to an answer); a turn that is still working once the channel is free again gets
its live message then.

A turn that waits for the one before it in its thread opens its live message with its first event,
when it starts, not when it arrives: a live message posted while it waits would sit above the
earlier turn's answer, and the thread would read out of order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from slack_sdk.errors import SlackApiError

from adapters.slack.events import Turn
from adapters.slack.post import PostsStopped, api_error
from adapters.slack.progress import Concluded, ProgressSink
from adapters.slack.render import Level
from bot.types import AgentReply, TurnEvent

logger = logging.getLogger(__name__)

# Seconds between two attempts to open a live message in a busy channel.
REOPEN_SECONDS = 2.0

# Opens the live message, or returns None when the channel is too busy for one right now.
OpenSink = Callable[[], Awaitable[ProgressSink | None]]


class LaterSink:
    """Progress whose live message comes later, or never: until it exists, nothing is shown."""

    _sink: ProgressSink | None = None

    @property
    def message_ts(self) -> str | None:
        return self._sink.message_ts if self._sink is not None else None

    @property
    def live(self) -> ProgressSink | None:
        return self._sink

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded:
        return await self._sink.conclude(reply, level) if self._sink is not None else Concluded()


class OpeningProgress(LaterSink):
    """Progress for a live turn: the events go to the live message once it exists, and wait until then."""

    def __init__(self, turn: Turn, open_sink: OpenSink, *, at_once: bool = True) -> None:
        self.turn = turn
        self._open_sink = open_sink
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
            # In order, including what arrives while these are being shown.
            shown = 0
            while shown < len(self._waiting):
                await sink.on_event(self._waiting[shown])
                shown += 1
        except Exception:
            logger.exception("showing the progress so far in %s failed", self.turn.key)
        self._waiting.clear()
        self._sink = sink

    async def _open_later(self) -> None:
        await asyncio.sleep(REOPEN_SECONDS)
        if self._sink is None and not self._closed and (self._opening is None or self._opening.done()):
            self._tried = time.monotonic()
            self._opening = asyncio.create_task(self._open())

    async def on_event(self, event: TurnEvent) -> None:
        if self._sink is not None:
            await self._sink.on_event(event)
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
        if self._sink is not None:
            await self._sink.close()

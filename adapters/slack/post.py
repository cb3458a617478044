"""Sending to Slack: per-channel pacing, and the Block Kit fallback remembered per workspace.

Slack allows about one chat.postMessage per second per channel; a long split answer or many
threads in one channel would otherwise hit 429. The client's rate-limit handler still waits out a
429 if one comes, but pacing keeps us from provoking it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.render import Level, OutMessage, Upload, plain_message

logger = logging.getLogger(__name__)

REFUSED_BLOCKS = frozenset({"invalid_blocks", "invalid_blocks_format"})
_MAX_PACED_CHANNELS = 10_000


def api_error(exc: SlackApiError) -> str:
    """The `error` code of a failed Web API call ("invalid_blocks", "ratelimited", …)."""
    data = exc.response.data if exc.response is not None else None
    return str(data.get("error", "")) if isinstance(data, dict) else ""


class PostsStopped(Exception):
    """nerve is shutting down: a post that had not started yet was not sent (one on its way was)."""


class ChannelPacer:
    """One post at a time per channel, at least `interval` seconds apart."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._locks: dict[str, asyncio.Lock] = {}
        self._last: dict[str, float] = {}
        self._stopped = False

    def stop(self) -> None:
        """Start no more posts: waiting ones raise PostsStopped, so a shutdown knows what was sent."""
        self._stopped = True

    def busy(self, channel: str) -> bool:
        """Whether a post to `channel` would have to wait for its turn."""
        lock = self._locks.get(channel)
        recent = self._last.get(channel, -1e9) + self._interval > time.monotonic()
        return recent or (lock is not None and lock.locked())

    async def run(self, channel: str, call: Callable[[], Awaitable[Any]]) -> Any:
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wait = self._last.get(channel, -1e9) + self._interval - time.monotonic()
            if wait > 0 and not self._stopped:
                await asyncio.sleep(wait)
            if self._stopped:
                raise PostsStopped(f"not posted to {channel}: nerve is shutting down")
            posted = True
            try:
                return await call()
            except SlackApiError as exc:
                # Refused (unknown method, blocks it does not take, …): nothing was posted, so the
                # channel's slot is still free for the fallback. A 429 still counts: it asks to wait.
                posted = api_error(exc) == "ratelimited"
                raise
            finally:
                if posted:
                    self._last[channel] = time.monotonic()
                self._forget_idle()

    def _forget_idle(self) -> None:
        if len(self._last) <= _MAX_PACED_CHANNELS:
            return
        horizon = time.monotonic() - self._interval
        for channel in [c for c, t in self._last.items() if t < horizon and not self._locks[c].locked()]:
            del self._last[channel]
            del self._locks[channel]


class Poster:
    """chat.postMessage / chat.update / file uploads, paced, with no link unfurling."""

    def __init__(self, client: AsyncWebClient, *, pace: float) -> None:
        self.client = client
        self._pacer = ChannelPacer(pace)
        # Per workspace: how rich a message Slack accepted last (answers), and whether the status
        # message may use task cards. Downgraded once on `invalid_blocks`, never retried per message.
        self._levels: dict[str, Level] = {}
        self._rich_status: dict[str, bool] = {}
        # Per workspace: whether chat.startStream works there (until Slack says it does not).
        self._streams: dict[str, bool] = {}

    def busy(self, channel: str) -> bool:
        """Whether a post to `channel` would wait behind others (Slack's pace per channel)."""
        return self._pacer.busy(channel)

    async def paced(self, channel: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Any call that puts a new message in `channel` (a stream's start), in the channel's pace."""
        return await self._pacer.run(channel, call)

    def stop_posting(self) -> None:
        """Shutting down: no post starts any more (PostsStopped); a call on its way still lands."""
        self._pacer.stop()

    async def tell(self, channel: str | None, user: str, text: str, thread: str | None = None) -> bool:
        """A note only `user` sees (`chat.postEphemeral`, in `thread` when given); False when it
        could not be posted (logged): such notes explain a click, and the click changed nothing."""
        if channel is None:
            return False
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread is not None:
            kwargs["thread_ts"] = thread
        try:
            await self.client.chat_postEphemeral(**kwargs)
        except SlackApiError as exc:
            logger.warning("could not post a note for %s: %s", user, api_error(exc))
            return False
        return True

    def level(self, team: str) -> Level:
        return self._levels.get(team, Level.RICH)

    def downgrade(self, team: str, level: Level) -> Level | None:
        """The next level down after Slack refused `level`'s blocks, or None at the bottom."""
        if level is Level.PLAIN:
            return None
        lower = Level(level + 1)
        if self._levels.get(team, Level.RICH) < lower:
            logger.warning("Slack refused our blocks in workspace %s; falling back to %s", team, lower.name)
            self._levels[team] = lower
        return lower

    def rich_status(self, team: str) -> bool:
        return self._rich_status.get(team, True)

    def refuse_rich_status(self, team: str) -> None:
        self._rich_status[team] = False

    def streams(self, team: str) -> bool:
        return self._streams.get(team, True)

    def refuse_streams(self, team: str) -> None:
        if self._streams.get(team, True):
            # Expected for many workspaces, once per start: not a problem to act on.
            logger.info("workspace %s has no streaming messages; answers are edited in place instead", team)
        self._streams[team] = False

    async def post(
        self,
        channel: str,
        thread_ts: str | None,
        message: OutMessage,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Post a message (in the thread if given); returns its ts. `metadata` is Slack message
        metadata (`adapters.slack.posts` names the turn and part with it)."""
        kwargs: dict[str, Any] = {
            "channel": channel,
            "text": message.text,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if thread_ts is not None:
            kwargs["thread_ts"] = thread_ts
        if message.blocks:
            kwargs["blocks"] = message.blocks
        if message.attachments:
            kwargs["attachments"] = message.attachments
        if metadata is not None:
            kwargs["metadata"] = metadata
        response = await self._pacer.run(channel, lambda: self.client.chat_postMessage(**kwargs))
        return str(response["ts"])

    async def update(self, channel: str, ts: str, message: OutMessage) -> None:
        """Replace a message we posted; blocks and attachments are cleared when the new one has none."""
        await self.client.chat_update(
            channel=channel,
            ts=ts,
            text=message.text,
            blocks=message.blocks or [],
            attachments=message.attachments or [],
        )

    async def upload(self, channel: str, thread_ts: str | None, upload: Upload) -> None:
        """A file in the thread (files.getUploadURLExternal → upload → files.completeUploadExternal)."""
        extra: dict[str, Any] = {"alt_txt": upload.alt_text} if upload.alt_text else {}
        await self._pacer.run(
            channel,
            lambda: self.client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                content=upload.content,
                filename=upload.filename,
                title=upload.title,
                **extra,
            ),
        )

    async def upload_all(self, channel: str, thread_ts: str | None, uploads: list[Upload]) -> None:
        """Each file once, in order; the files Slack did not take are named in one line in the
        thread, so the answer above stays and people know what is missing."""
        failed: list[str] = []
        for upload in uploads:
            try:
                await self.upload(channel, thread_ts, upload)
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
                reason = api_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
                logger.warning("could not upload %s to %s: %s", upload.filename, channel, reason)
                failed.append(upload.filename)
        if not failed:
            return
        named = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        note = f"⚠️ Could not attach {named} to this thread."
        try:
            await self.post(channel, thread_ts, plain_message(note))
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            logger.warning("could not say in %s which files are missing: %s", channel, exc)

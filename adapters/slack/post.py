"""Putting messages into Slack: per-channel pacing (about one post a second, so a split answer does not
provoke 429), the Block Kit fallback per workspace, and each post of a turn sent once.

A turn can run twice (a process died before finishing its event, a job retried elsewhere), so each
post is announced in the store before it is sent, completed with its ts (`bot.store.posts`), and
carries metadata naming the turn and part: a second run goes on in the first run's live message,
skips what is out, and reads the thread back for a part in doubt. A file in doubt is left out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.common.posts import PostLedger
from adapters.common.refs import message_ref, parse_message_ref
from adapters.slack.client import findable, in_doubt
from adapters.slack.events import Turn
from adapters.slack.render import Level, OutMessage, Upload, plain_message
from bot.agent import PostRecords

logger = logging.getLogger(__name__)

REFUSED_BLOCKS = frozenset({"invalid_blocks", "invalid_blocks_format"})
_MAX_PACED_CHANNELS = 10_000
# Failures of a call to Slack that are its answer (or its absence), never a bug of ours.
SEND_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError)


def api_error(exc: SlackApiError) -> str:
    """The `error` code of a failed Web API call ("invalid_blocks", "ratelimited", …)."""
    data = exc.response.data if exc.response is not None else None
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def _reason(exc: BaseException) -> str:
    """A failed call in a log line: Slack's error code, its HTTP status, or the exception's kind."""
    if isinstance(exc, SlackApiError):
        return api_error(exc) or f"HTTP {exc.response.status_code}"
    return str(exc) or type(exc).__name__


class PostsStopped(Exception):
    """nerve is shutting down: a post that had not started yet was not sent (one on its way was)."""


class Poster:
    """Posts, edits and uploads, one at a time per channel and `pace` seconds apart, never unfurled."""

    def __init__(self, client: AsyncWebClient, *, pace: float) -> None:
        self.client = client
        self._pace = pace
        self._locks: dict[str, asyncio.Lock] = {}
        self._last: dict[str, float] = {}
        self._stopped = False
        # Per workspace: how rich a message Slack accepted last (answers), and whether the status
        # message may use task cards. Downgraded once on `invalid_blocks`, never retried per message.
        self._levels: dict[str, Level] = {}
        self.plain_status: set[str] = set()
        # The workspaces where chat.startStream does not work (as Slack said).
        self.no_streams: set[str] = set()

    def busy(self, channel: str) -> bool:
        """Whether a post to `channel` would wait behind others (Slack's pace per channel)."""
        lock = self._locks.get(channel)
        recent = self._last.get(channel, -1e9) + self._pace > time.monotonic()
        return recent or (lock is not None and lock.locked())

    def stop_posting(self) -> None:
        """Shutting down: no post starts any more (PostsStopped); a call on its way still lands."""
        self._stopped = True

    async def paced(self, channel: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Any call that puts a new message in `channel` (a stream's start), in the channel's pace."""
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wait = self._last.get(channel, -1e9) + self._pace - time.monotonic()
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
        horizon = time.monotonic() - self._pace
        for channel in [c for c, t in self._last.items() if t < horizon and not self._locks[c].locked()]:
            del self._last[channel]
            del self._locks[channel]

    async def tell(
        self,
        channel: str | None,
        user: str,
        text: str,
        thread: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        """A note only `user` sees; one that cannot be posted is logged."""
        if channel is None:
            return
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread, blocks=blocks
            )
        except SlackApiError as exc:
            logger.warning("could not post a note for %s: %s", user, api_error(exc))

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

    def refuse_streams(self, team: str) -> None:
        if team not in self.no_streams:
            # Expected for many workspaces, once per start: not a problem to act on.
            logger.info("workspace %s has no streaming messages; answers are edited in place instead", team)
        self.no_streams.add(team)

    async def post(
        self,
        channel: str,
        thread_ts: str | None,
        message: OutMessage,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        # The client leaves out what is None; empty blocks or attachments are left out too.
        send = partial(
            self.client.chat_postMessage,
            channel=channel,
            text=message.text,
            unfurl_links=False,
            unfurl_media=False,
            thread_ts=thread_ts,
            blocks=message.blocks or None,
            attachments=message.attachments or None,
            metadata=metadata,
        )
        response = await self.paced(channel, send)
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

    async def upload_all(self, channel: str, thread_ts: str | None, uploads: list[Upload]) -> None:
        """Each file once, in order; the files Slack did not take are named in one line in the thread."""
        failed: list[str] = []
        for upload in uploads:
            try:
                call = partial(
                    self.client.files_upload_v2,
                    channel=channel,
                    thread_ts=thread_ts,
                    content=upload.content,
                    filename=upload.filename,
                    title=upload.title,
                    alt_txt=upload.alt_text or None,
                )
                await self.paced(channel, call)
            except SEND_ERRORS as exc:
                reason = api_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
                logger.warning("could not upload %s to %s: %s", upload.filename, channel, reason)
                failed.append(upload.filename)
        if not failed:
            return
        named = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        note = f"⚠️ Could not attach {named} to this thread."
        try:
            await self.post(channel, thread_ts, plain_message(note))
        except SEND_ERRORS as exc:
            logger.warning("could not say in %s which files are missing: %s", channel, exc)


# The message metadata event type of every message of a turn's answer.
METADATA_TYPE = "nerve_turn"
LIVE = "live"
# Pages of the thread read back when a part is in doubt (Slack gives up to 200 messages a page).
READ_BACK_PAGES = 5
# Sends of one part in one run when each fails in doubt and the thread does not show it, and the
# seconds before the thread is read back (Slack shows a message it just took a moment later).
SENDS = 3
IN_DOUBT_PAUSE = 1.0


def answer_part(index: int) -> str:
    return f"answer:{index}"


class TurnPosts(PostLedger):
    """What one turn has posted, from the store, and the posting that keeps it once."""

    def __init__(self, records: PostRecords | None, poster: Poster, turn: Turn) -> None:
        super().__init__(records if turn.event_id else None, f"slack:{turn.event_id}")
        self._poster = poster
        self._turn = turn
        # Messages of the answer out: a turn cut off after the first counts as answered.
        self.delivered = 0

    @property
    def answered(self) -> bool:
        """Part of the answer is out (or may be): no live message is opened above it again."""
        return any(part.startswith("answer:") for part in self.known)

    async def intend_live(self) -> dict[str, Any] | None:
        """Announce the live message before posting it; its metadata lets a next run find it in doubt."""
        if self.records is None:
            return None
        if LIVE not in self.known:
            await self.intend(LIVE)
        return self._metadata(LIVE)

    async def note_live(self, ts: str | None) -> None:
        """Keep the live message's ts, so a second run goes on in it."""
        if ts is not None and self.known.get(LIVE) is None:
            await self.record(LIVE, ts)

    async def put(self, part: str, message: OutMessage, replace_ts: str | None = None) -> None:
        """Show `part` by replacing the live message `replace_ts`, else post it unless an earlier run did."""
        turn = self._turn
        if replace_ts is not None:
            await self._poster.update(turn.channel, replace_ts, message)
            await self.record(part, replace_ts)
            return
        if self.records is None:
            await self._poster.post(turn.channel, turn.reply_thread_ts, message)
            return
        if await self.landed(part) is not None:
            logger.info("Slack event %s: %s was posted before; not posting it again", turn.event_id, part)
            return
        if part not in self.known:
            await self.intend(part)
        await self.record(part, await self._send(part, message))

    async def _send(self, part: str, message: OutMessage) -> str:
        """Post `part` once: a send that fails in doubt is sent again only when the thread lacks it."""
        turn = self._turn
        sends = 1
        while True:
            try:
                with findable():
                    return await self._poster.post(
                        turn.channel, turn.reply_thread_ts, message, metadata=self._metadata(part)
                    )
            except SEND_ERRORS as exc:
                if not in_doubt(exc):
                    raise
                logger.warning(
                    "Slack event %s: no answer from Slack to %s (%s); looking for it in the thread",
                    turn.event_id,
                    part,
                    _reason(exc),
                )
                await asyncio.sleep(IN_DOUBT_PAUSE)
                found = await self._read_back(part)
                if found is not None:
                    logger.info("Slack event %s: %s had landed; not posting it again", turn.event_id, part)
                    return found
                if sends >= SENDS:
                    raise
                sends += 1

    async def record(self, part: str, ts: str) -> None:
        """`part` is out at `ts`: posted, or the live message that was replaced by it (or showed it)."""
        await self.keep(part, message_ref(self._turn.channel, ts))

    def _metadata(self, part: str) -> dict[str, Any]:
        return {"event_type": METADATA_TYPE, "event_payload": {"turn": self.turn_id, "part": part}}

    async def landed(self, part: str) -> str | None:
        """The ts of `part` if it is out: from the store, or (in doubt) found in the thread."""
        if part not in self.known:
            return None
        known = parse_message_ref(self.known[part])
        if known is not None:
            return known[1]
        found = await self._read_back(part)
        if found is not None:
            await self.record(part, found)
        return found

    async def _read_back(self, part: str) -> str | None:
        """The part's message in the thread, by its metadata; None when absent or Slack cannot be asked
        (then it is posted: an answer twice is better than none)."""
        turn = self._turn
        client = self._poster.client
        # The client leaves out what is None (the first page's cursor, `oldest` of a turn with no post).
        common: dict[str, Any] = {"channel": turn.channel, "include_all_metadata": True, "limit": 200}
        try:
            for _ in range(READ_BACK_PAGES):
                if turn.reply_thread_ts is not None:
                    page = await client.conversations_replies(ts=turn.reply_thread_ts, **common)
                else:
                    page = await client.conversations_history(oldest=turn.message_ts or None, **common)
                for message in page.get("messages") or []:
                    if self._is_part(message, part):
                        return str(message["ts"])
                common["cursor"] = (page.get("response_metadata") or {}).get("next_cursor")
                if not common["cursor"]:
                    return None
        except SEND_ERRORS as exc:
            logger.warning(
                "Slack event %s: could not read the thread back to see whether %s landed (%s); posting it",
                turn.event_id,
                part,
                _reason(exc),
            )
        return None

    def _is_part(self, message: Any, part: str) -> bool:
        """Whether `message` carries the metadata this turn posts `part` with."""
        metadata = message.get("metadata") if isinstance(message, dict) else None
        return isinstance(metadata, dict) and all(
            metadata.get(k) == v for k, v in self._metadata(part).items()
        )

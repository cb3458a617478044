"""A turn's posts in Slack, keyed by the turn: answered again, it edits or skips what is out.

The same turn can run twice: the process died after posting the answer but before its event was
recorded as finished, or a job was retried on another replica. Each post of a turn is announced in
the store before it is sent and completed with its ts (`bot.store.posts`), and carries Slack message
metadata naming the turn and the part. A second run then:

- goes on in the live message of the first run (no second "Thinking…"; the answer replaces it),
- skips the messages of the answer that are out already,
- asks Slack about a part announced but never completed (the process died while it was on its way):
  the thread is read back with its metadata, and a message found there is adopted, not posted again.

A send that fails when Slack may have stored the message all the same (the connection broke before
the answer came back, or a 5xx) is in doubt the same way: the client does not send it again blindly
(`adapters.slack.retries`); the thread is read back, and the part is sent again only if it is not
there.

Files go up at most once: a second run never uploads them again, and one in doubt is left out
(the answer's text above is what matters; the log says so).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.common.refs import message_ref, parse_message_ref
from adapters.slack.events import Turn
from adapters.slack.post import Poster, api_error
from adapters.slack.render import OutMessage
from adapters.slack.retries import findable, in_doubt
from bot.agent import PostRecords

logger = logging.getLogger(__name__)

# The message metadata event type of every message of a turn's answer.
METADATA_TYPE = "nerve_turn"
LIVE = "live"
FILES = "files"
# Pages of the thread read back when a part is in doubt (Slack gives up to 200 messages a page).
READ_BACK_PAGES = 5
# Sends of one part in one run when each fails in doubt and the thread does not show it, and the
# seconds before the thread is read back (Slack shows a message it just took a moment later).
SENDS = 3
IN_DOUBT_PAUSE = 1.0


def answer_part(index: int) -> str:
    return f"answer:{index}"


class TurnPosts:
    """What one turn has posted, from the store, and the posting that keeps it once."""

    def __init__(self, records: PostRecords | None, poster: Poster, turn: Turn) -> None:
        self._records = records if turn.event_id else None
        self._poster = poster
        self._turn = turn
        self._known: dict[str, str | None] = {}

    @property
    def turn_id(self) -> str:
        return f"slack:{self._turn.event_id}"

    async def load(self) -> TurnPosts:
        """Read what an earlier run of this turn posted (nothing for a first run)."""
        if self._records is not None:
            self._known = await self._records.posts_of(self.turn_id)
        return self

    @property
    def answered(self) -> bool:
        """Part of the answer is out (or may be): no live message is opened above it again."""
        return any(part.startswith("answer:") for part in self._known)

    async def live_ts(self) -> str | None:
        """The live message an earlier run posted, if it landed."""
        return await self._landed(LIVE)

    async def intend_live(self) -> None:
        """Announce the live message before posting it: a run that dies before recording its ts
        leaves it in doubt, and the next run finds it by its metadata (`live_metadata`)."""
        if self._records is not None and LIVE not in self._known:
            await self._records.intend_post(self.turn_id, LIVE)
            self._known[LIVE] = None

    def live_metadata(self) -> dict[str, Any] | None:
        return self._metadata(LIVE) if self._records is not None else None

    async def note_live(self, ts: str | None) -> None:
        """Keep the live message's ts, so a second run goes on in it."""
        if ts is None or self._records is None or self._known.get(LIVE) is not None:
            return
        ref = message_ref(self._turn.channel, ts)
        self._known[LIVE] = ref
        await self._records.record_post(self.turn_id, LIVE, ref)

    async def post(self, part: str, message: OutMessage) -> str | None:
        """Post `message` as `part` of the answer; None when an earlier run already posted it."""
        turn = self._turn
        if self._records is None:
            return await self._poster.post(turn.channel, turn.reply_thread_ts, message)
        if part in self._known:
            landed = await self._landed(part)
            if landed is not None:
                logger.info("Slack event %s: %s was posted before; not posting it again", turn.event_id, part)
                return None
        else:
            await self._records.intend_post(self.turn_id, part)
            self._known[part] = None
        ts = await self._send(part, message)
        await self._record(part, ts)
        return ts

    async def _send(self, part: str, message: OutMessage) -> str:
        """Post `part` once: a send that fails in doubt is looked for in the thread, and sent again
        (up to SENDS in all) only when it is not there."""
        turn = self._turn
        sends = 1
        while True:
            try:
                with findable():
                    return await self._poster.post(
                        turn.channel, turn.reply_thread_ts, message, metadata=self._metadata(part)
                    )
            except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
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

    async def replaced(self, part: str, ts: str) -> None:
        """`part` of the answer went out by replacing the live message `ts` (or `ts` showed it already)."""
        if self._records is not None:
            await self._record(part, ts)

    async def take_files(self) -> bool:
        """True once per turn: this run uploads the answer's files; never a second time."""
        if self._records is None:
            return True
        if FILES in self._known:
            if self._known[FILES] is None:
                logger.warning(
                    "Slack event %s: its files may not all have gone up before the restart; not sending "
                    "them twice",
                    self._turn.event_id,
                )
            return False
        await self._records.intend_post(self.turn_id, FILES)
        self._known[FILES] = None
        return True

    async def files_done(self) -> None:
        if self._records is not None:
            self._known[FILES] = FILES
            await self._records.record_post(self.turn_id, FILES, FILES)

    async def _record(self, part: str, ts: str) -> None:
        assert self._records is not None
        ref = message_ref(self._turn.channel, ts)
        self._known[part] = ref
        await self._records.record_post(self.turn_id, part, ref)

    def _metadata(self, part: str) -> dict[str, Any]:
        return {"event_type": METADATA_TYPE, "event_payload": {"turn": self.turn_id, "part": part}}

    async def _landed(self, part: str) -> str | None:
        """The ts of `part` if it is out: from the store, or (in doubt) found in the thread."""
        if part not in self._known:
            return None
        known = parse_message_ref(self._known[part])
        if known is not None:
            return known[1]
        found = await self._read_back(part)
        if found is not None:
            await self._record(part, found)
        return found

    async def _read_back(self, part: str) -> str | None:
        """Look for the part's message in the thread by its metadata; None when it is not there or
        Slack cannot be asked (then it is posted: an answer twice is better than none)."""
        turn = self._turn
        client = self._poster.client
        cursor: str | None = None
        try:
            for _ in range(READ_BACK_PAGES):
                common: dict[str, Any] = {"channel": turn.channel, "include_all_metadata": True, "limit": 200}
                if cursor:
                    common["cursor"] = cursor
                if turn.reply_thread_ts is not None:
                    page = await client.conversations_replies(ts=turn.reply_thread_ts, **common)
                else:
                    if turn.message_ts:
                        common["oldest"] = turn.message_ts
                    page = await client.conversations_history(**common)
                for message in page.get("messages") or []:
                    if self._is_part(message, part):
                        return str(message["ts"])
                cursor = (page.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    return None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            logger.warning(
                "Slack event %s: could not read the thread back to see whether %s landed (%s); posting it",
                turn.event_id,
                part,
                _reason(exc),
            )
        return None

    def _is_part(self, message: Any, part: str) -> bool:
        metadata = message.get("metadata") if isinstance(message, dict) else None
        if not isinstance(metadata, dict) or metadata.get("event_type") != METADATA_TYPE:
            return False
        payload = metadata.get("event_payload")
        return (
            isinstance(payload, dict) and payload.get("turn") == self.turn_id and payload.get("part") == part
        )


def _reason(exc: BaseException) -> str:
    """A failed call in a log line: Slack's error code, its HTTP status, or the exception's kind."""
    if isinstance(exc, SlackApiError):
        return api_error(exc) or f"HTTP {exc.response.status_code}"
    return str(exc) or type(exc).__name__

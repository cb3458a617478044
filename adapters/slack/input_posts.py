"""The thread messages of a turn's requests for input: posted when a server asks, updated when it is over.

A request is its own message in the thread, never part of the live answer: the answer streams or is
edited in place above it, and the final answer lands there while the request message keeps its
outcome. Posting goes through the adapter's poster (paced per channel; the client waits out 429s)
from tasks of its own, so recording the event never waits on Slack; an update waits for its post.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.slack.input_view import request_message, settled_message
from adapters.slack.post import Poster, api_error
from bot.types import InputRequest, TurnEvent

logger = logging.getLogger(__name__)

INPUT_KINDS = frozenset({"input_needed", "input_done"})


class InputPosts:
    """One turn's request messages in one thread, by request id."""

    def __init__(self, poster: Poster, channel: str, thread_ts: str | None) -> None:
        self._poster = poster
        self._channel = channel
        self._thread_ts = thread_ts
        self._posts: dict[str, asyncio.Task[str | None]] = {}
        # Per request, the last post or update under way: each update waits for the one before it,
        # so Slack shows the outcomes in the order they happened.
        self._latest: dict[str, asyncio.Task[str | None]] = {}
        self._pending: set[asyncio.Task[str | None]] = set()

    def take(self, event: TurnEvent) -> bool:
        """Handle `event` if it is about a request for input; says whether it was."""
        if event.kind not in INPUT_KINDS:
            return False
        request = event.input
        if request is None:
            return True
        rid = request.request_id
        if event.kind == "input_needed":
            if rid not in self._posts:
                self._posts[rid] = self._latest[rid] = self._start(self._post(request))
        else:
            self._latest[rid] = self._start(self._settle(request, event.message, self._latest.get(rid)))
        return True

    def _start(self, work: Coroutine[Any, Any, str | None]) -> asyncio.Task[str | None]:
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def _post(self, request: InputRequest) -> str | None:
        try:
            return await self._poster.post(self._channel, self._thread_ts, request_message(request))
        except SlackApiError as exc:
            logger.warning("could not post the request for input %s: %s", request.request_id, api_error(exc))
        except Exception:
            logger.exception("posting the request for input %s failed", request.request_id)
        return None

    async def _settle(
        self, request: InputRequest, status: str, before: asyncio.Task[str | None] | None
    ) -> str | None:
        ts = await before if before is not None else None
        if ts is None:
            return None
        try:
            await self._poster.update(self._channel, ts, settled_message(request, status))
        except SlackApiError as exc:
            logger.warning(
                "could not update the request for input %s: %s", request.request_id, api_error(exc)
            )
        except Exception:
            logger.exception("updating the request for input %s failed", request.request_id)
        return ts

    async def close(self) -> None:
        """Wait for posts and updates under way, so the answer comes after its requests' outcomes."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

"""The thread messages of requests for input: posted when a server asks, updated when it is over.

A request is its own message in the thread, never part of the live answer: the answer streams or is
edited in place above it, and the final answer lands there while the request message keeps its
outcome. Posting goes through the adapter's poster (paced per channel; the client waits out 429s)
from tasks of its own, so recording the event never waits on Slack; an update waits for its post.

A question that parks its turn outlives the turn that posted it: it is answered by a click after
that turn ended (its message is updated by whoever took the answer), and how it ended may be told
to the turn resumed later (an expiry). `RequestMessages` remembers, for one bot, where each request
message is and what it shows, so any of them can update it, once per outcome and in order. Where
it is, is also stored with its request (as for approvals), so a process that did not post it (after
a restart, the sweep ending a parked question nobody answered) updates it too.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ClassVar

from slack_sdk.errors import SlackApiError

from adapters.common.refs import message_ref, parse_message_ref
from adapters.common.settle import Settled
from adapters.slack.input_view import request_message, settled_message
from adapters.slack.post import Poster, api_error
from bot.types import Ask, InputRequest, TurnEvent

logger = logging.getLogger(__name__)

# Request messages remembered per bot; the oldest are forgotten past this.
REMEMBERED = 10_000
# Stores where a request's message was posted (`Agent.ask_posted`): the ask, message ref.
KeepRef = Callable[[Ask, str], Awaitable[None]]


class RequestMessages(Settled[tuple[str, str]]):
    """Where one bot's request messages are and how each shows its request ended.

    Kept per poster (one per bot), so every turn's progress sink and the click handlers of a bot
    share it without being handed it. After a restart it is empty: a click carries the message it
    was made on, and a request where it was posted (`message_ref`, once `keep_refs` stores it),
    which is enough to update that one.
    """

    _of: ClassVar[weakref.WeakKeyDictionary[Poster, RequestMessages]] = weakref.WeakKeyDictionary()

    def __init__(self, poster: Poster, limit: int = REMEMBERED) -> None:
        super().__init__(self._update, parse_message_ref, limit=limit)
        self._poster = poster
        self._keep_ref: KeepRef | None = None

    @classmethod
    def of(cls, poster: Poster) -> RequestMessages:
        found = cls._of.get(poster)
        if found is None:
            found = cls._of[poster] = cls(poster)
        return found

    def keep_refs(self, keep: KeepRef) -> None:
        """Store where each request message is posted through `keep` (the bot's agent)."""
        self._keep_ref = keep

    async def keep(self, ask: Ask, channel: str, ts: str) -> None:
        """The request's message is posted at `ts`: remember it, and store it with its request."""
        self.posted(ask.id, (channel, ts))
        if self._keep_ref is None:
            return
        try:
            await self._keep_ref(ask, message_ref(channel, ts))
        except Exception:
            logger.exception("could not store where the request for input %s is shown", ask.id)

    async def _update(self, place: tuple[str, str], request: InputRequest, status: str) -> bool:
        try:
            await self._poster.update(place[0], place[1], settled_message(request, status))
            return True
        except SlackApiError as exc:
            logger.warning(
                "could not update the request for input %s: %s", request.request_id, api_error(exc)
            )
        except Exception:
            logger.exception("updating the request for input %s failed", request.request_id)
        return False


class InputPosts:
    """One turn's request messages in one thread, by request id."""

    def __init__(self, poster: Poster, channel: str, thread_ts: str | None) -> None:
        self._poster = poster
        self._messages = RequestMessages.of(poster)
        self._channel = channel
        self._thread_ts = thread_ts
        self._posted: set[str] = set()
        self._pending: set[asyncio.Task[Any]] = set()

    def take(self, event: TurnEvent) -> bool:
        """Handle `event` if it asks a question or a link ("ask") or says how one ended ("ask_done");
        says whether it was. Other asks are not messages of this kind."""
        ask = event.ask
        if ask is None or ask.input is None:
            return False
        if event.kind == "ask" and ask.id not in self._posted:
            self._posted.add(ask.id)
            self._messages.posting(ask.id)
            self._start(self._post(ask, ask.input))
        elif event.kind == "ask_done":
            # Settled after this turn's post of it, in order; a request an earlier turn posted (a
            # parked question, told of in the resumed turn) is found by its id.
            self._start(self._messages.settle(ask.input, event.message))
        return True

    def _start(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _post(self, ask: Ask, request: InputRequest) -> None:
        ts: str | None = None
        try:
            ts = await self._poster.post(self._channel, self._thread_ts, request_message(request))
        except SlackApiError as exc:
            logger.warning("could not post the request for input %s: %s", request.request_id, api_error(exc))
        except Exception:
            logger.exception("posting the request for input %s failed", request.request_id)
        if ts is None:
            self._messages.posted(request.request_id, None)
        else:
            await self._messages.keep(ask, self._channel, ts)

    async def close(self) -> None:
        """Wait for posts and updates under way, so the answer comes after its requests' outcomes."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

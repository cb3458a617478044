"""A request's message settled once per outcome, in order, by whoever learns how it ended (its
turn, a click, the sweep, a resumed turn): its edits run after its post."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Generic, TypeVar

from bot.agent import INPUT_SETTLED as SETTLED
from bot.agent import Agent
from bot.errors import AskError
from bot.types import Answer, InputOutcome, InputRequest

logger = logging.getLogger(__name__)

Place = TypeVar("Place")
# How long a settle waits for the message's post before giving up on showing it.
POST_WAIT = 60.0
# The core's note about a request that is over, read back as how it ended.
_ENDED_BY_NOTE = {note: status for status, note in SETTLED.items()}


def ended(outcome: InputOutcome) -> str | None:
    """How the request of an answer that changed nothing had already ended, when it had."""
    if outcome.status is not None and outcome.status != "open":
        return outcome.status
    return _ENDED_BY_NOTE.get(outcome.note) if outcome.note is not None else None


async def answer_input(agent: Agent, request_id: str, user: str, answer: Answer) -> InputOutcome:
    """One answer; one that changes nothing still names its request, so its message shows its end."""
    try:
        answered = await agent.answer(request_id, user, answer)
    except AskError as exc:
        return InputOutcome(changed=False, request=exc.request, note=exc.message)
    assert answered.input is not None, "a question's answer carries its outcome"
    return answered.input


@dataclass(slots=True)
class _Shown(Generic[Place]):
    place: asyncio.Future[Place | None]
    status: str | None = None  # how it ended, as the message shows it; None while it is open
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(eq=False)
class Settled(Generic[Place]):
    """Where one bot's request messages are and how each shows its end; `parse` reads a stored reference."""

    edit: Callable[[Place, InputRequest, str], Awaitable[bool]]
    parse: Callable[[str | None], Place | None]
    _: KW_ONLY
    limit: int

    def __post_init__(self) -> None:
        self._shown: OrderedDict[str, _Shown[Place]] = OrderedDict()

    def posting(self, request_id: str) -> None:
        """The request's message is being posted: settles wait for `posted`."""
        if request_id not in self._shown:
            self._remember(request_id, asyncio.get_running_loop().create_future())

    def posted(self, request_id: str, place: Place | None) -> None:
        """The request's message is at `place` (None: it could not be posted)."""
        shown = self._shown.get(request_id)
        if shown is None or shown.place.done():
            self._remember(request_id, _done(place))
        else:
            shown.place.set_result(place)

    async def settle(self, request: InputRequest, status: str, place: Place | None = None) -> bool:
        """Show `status` on the request's message (at `place`, or as stored); False when unknown or shown."""

        rid = request.request_id
        shown = self._shown.get(rid)
        if shown is None:
            place = place if place is not None else self.parse(request.message_ref)
            if place is not None:
                shown = self._remember(rid, _done(place))
        if shown is None:
            logger.info("request for input %s ended (%s) but its message is not known here", rid, status)
            return False
        if shown.status == status:
            return False
        before, shown.status = shown.status, status
        async with shown.turn:
            try:
                async with asyncio.timeout(POST_WAIT):
                    where = await asyncio.shield(shown.place)
            except TimeoutError:
                logger.warning("the message of request for input %s was not posted in time", rid)
                where = None
            if where is not None and await self.edit(where, request, status):
                return True
        if shown.status == status:
            shown.status = before  # not shown: a later attempt may show it
        return False

    def _remember(self, request_id: str, place: asyncio.Future[Place | None]) -> _Shown[Place]:
        shown = self._shown[request_id] = _Shown(place=place)
        self._shown.move_to_end(request_id)
        while len(self._shown) > self.limit:
            self._shown.popitem(last=False)
        return shown


def _done(place: Place | None) -> asyncio.Future[Place | None]:
    future: asyncio.Future[Place | None] = asyncio.get_running_loop().create_future()
    future.set_result(place)
    return future

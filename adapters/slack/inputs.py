"""A server's request for input on Slack: its message in the thread, and the clicks and forms that answer it.

A request is its own message in the thread, posted from tasks of its own so recording the event
never waits on Slack; where it is is stored with the request, so any process updates it once per
outcome. "Fill in" opens the modal within the click's 3-second `trigger_id`; what the core finds
wrong comes back next to its field. "Open" in URL mode is the consent; what changes nothing is told
only to the clicker.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from slack_sdk.errors import SlackApiError

from adapters.common.refs import message_ref, parse_message_ref
from adapters.common.settle import Settled, answer_input, ended
from adapters.common.tasks import Owned, Spawn
from adapters.slack.clicks import click_of, payload_field
from adapters.slack.input_view import (
    ModalPlace,
    error_blocks,
    first_input,
    input_modal,
    parse_click,
    read_answer,
    read_place,
    request_message,
    settled_message,
)
from adapters.slack.post import Poster, api_error
from bot.agent import Agent
from bot.types import Ask, Cancel, Decline, InputOutcome, InputRequest, LinkOpened, Submit, TurnEvent

logger = logging.getLogger(__name__)

# Request messages remembered per bot; the oldest are forgotten past this.
REMEMBERED = 10_000
# Stores where a request's message was posted (`Agent.ask_posted`): the ask, message ref.
KeepRef = Callable[[Ask, str], Awaitable[None]]


class RequestMessages(Settled[tuple[str, str]]):
    """Where one bot's request messages are and how each shows its end: one per poster, shared by all."""

    _of: ClassVar[weakref.WeakKeyDictionary[Poster, RequestMessages]] = weakref.WeakKeyDictionary()

    def __init__(self, poster: Poster) -> None:
        super().__init__(self._update, parse_message_ref, limit=REMEMBERED)
        self._poster = poster
        # Stores where each request message is posted (the bot's agent, once its clicks are handled).
        self.keep_ref: KeepRef | None = None

    @classmethod
    def of(cls, poster: Poster) -> RequestMessages:
        return cls._of.setdefault(poster, cls(poster))

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
        self._pending = Owned()

    def take(self, event: TurnEvent) -> bool:
        """Handle `event` if it is a question or a link ("ask") or its end ("ask_done"); says whether."""
        ask = event.ask
        if ask is None or ask.input is None:
            return False
        if event.kind == "ask" and ask.id not in self._posted:
            self._posted.add(ask.id)
            self._messages.posting(ask.id)
            self._pending.spawn(self._post(ask, ask.input))
        elif event.kind == "ask_done":
            # Settled after this turn's post of it, in order; a request an earlier turn posted (a
            # parked question, told of in the resumed turn) is found by its id.
            self._pending.spawn(self._messages.settle(ask.input, event.message))
        return True

    async def _post(self, ask: Ask, request: InputRequest) -> None:
        ts: str | None = None
        try:
            ts = await self._poster.post(self._channel, self._thread_ts, request_message(request))
        except SlackApiError as exc:
            logger.warning("could not post the request for input %s: %s", request.request_id, api_error(exc))
        except Exception:
            logger.exception("posting the request for input %s failed", request.request_id)
        # Remembered here, and stored with its request so any process finds it.
        self._messages.posted(ask.id, None if ts is None else (self._channel, ts))
        keep_ref = self._messages.keep_ref
        if ts is None or keep_ref is None:
            return
        try:
            await keep_ref(ask, message_ref(self._channel, ts))
        except Exception:
            logger.exception("could not store where the request for input %s is shown", ask.id)

    async def close(self) -> None:
        """Wait for posts and updates under way, so the answer comes after its requests' outcomes."""
        await self._pending.idle()


FAILED = "Sorry — something went wrong on my side with that; please try again."
NO_FORM = "Sorry — Slack did not let me open the form in time; please click “Fill in” again."

Resume = Callable[[str], Awaitable[None]]


class InputClicks:
    """Turns clicks, submissions and dismissals into answers for the core."""

    def __init__(self, agent: Agent, poster: Poster, resume: Resume, spawn: Spawn) -> None:
        self._agent = agent
        self._poster = poster
        self._messages = RequestMessages.of(poster)
        # The bot's request messages, wherever posted, are stored with their requests.
        self._messages.keep_ref = agent.ask_posted

        # What goes on with a parked turn once nothing is left to wait for (as after approvals).
        self._resume = resume
        self._spawn = spawn

    # --- buttons on the thread message ----------------------------------------------------------

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """One `block_actions` delivery on a request's message (already acked)."""
        pressed = click_of(body)
        click = parse_click(pressed.action)
        user, channel, thread = pressed.user, pressed.channel, pressed.thread
        if click is None or user is None:
            logger.warning(
                "ignored a click that is not on a request for input: %s", pressed.action.get("action_id")
            )
            return
        choice, rid = click
        place = ModalPlace(request_id=rid, channel=channel, thread_ts=thread, message_ts=pressed.message)
        try:
            if choice == "fill":
                outcome = await self._fill(rid, user, payload_field(body, "trigger_id"), place)
            else:
                # URL mode: the person opened the link (Slack opens it in their browser), so they agreed.
                answer = LinkOpened() if choice == "open" else Decline()
                outcome = await answer_input(self._agent, rid, user, answer)
        except Exception:
            logger.exception("answering request for input %s failed", rid)
            outcome = InputOutcome(changed=False, request=None, note=FAILED)
        if not outcome.changed and outcome.note is not None:
            await self._poster.tell(channel, user, outcome.note, thread)
        await self._after(outcome, place)

    async def _fill(self, request_id: str, user: str, trigger: str | None, place: ModalPlace) -> InputOutcome:
        """Open the form for its person; a note for anyone else (or when it is over)."""
        outcome = await self._agent.open_input(request_id, user)
        request = outcome.request
        if outcome.note is not None:
            return outcome
        if request is None or request.mode != "form" or request.form is None or trigger is None:
            return replace(outcome, note=FAILED)
        try:
            await self._poster.client.views_open(trigger_id=trigger, view=input_modal(request, place))
        except SlackApiError as exc:
            logger.warning("could not open the form of request %s: %s", request_id, api_error(exc))
            return replace(outcome, note=NO_FORM)
        return outcome

    async def _after(self, outcome: InputOutcome, place: ModalPlace) -> None:
        """Its message shows how the request ended (or had ended); a parked turn the answer freed goes on."""
        status = outcome.status if outcome.changed else ended(outcome)
        if outcome.request is not None and status is not None:
            await self._messages.settle(outcome.request, status, _message_of(place))
        if outcome.resume is not None:
            await self._resume(outcome.resume)

    # --- the modal ------------------------------------------------------------------------------

    async def on_submit(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """A submitted modal: None to close it, or Slack's `errors` response to keep it open."""
        view = body.get("view")
        view = view if isinstance(view, Mapping) else {}
        place = read_place(view.get("private_metadata"))
        user = payload_field(body, "user", "id")
        blocks = [b for b in view.get("blocks") or [] if isinstance(b, dict)]
        if place is None or user is None:
            return None
        try:
            opened = await self._agent.open_input(place.request_id, user)
            request = opened.request
            if opened.note is not None or request is None or request.form is None:
                return await self._note(place, user, blocks, opened.note or FAILED, opened)
            state = view.get("state")
            values = state.get("values") if isinstance(state, Mapping) else None
            outcome = await answer_input(
                self._agent, request.request_id, user, Submit(values=read_answer(request.form, values))
            )
        except Exception:
            logger.exception("taking the form of request %s failed", place.request_id)
            return await self._note(place, user, blocks, FAILED)
        if outcome.errors:
            assert request.form is not None
            errors = error_blocks(request.form, outcome.errors, blocks)
            if errors:
                return {"response_action": "errors", "errors": errors}
        if not outcome.changed:
            return await self._note(place, user, blocks, outcome.note or FAILED, outcome)
        # Slack wants the response within 3 seconds: the message and the parked turn go on after it.
        self._spawn(self._after(outcome, place))
        return None

    async def on_close(self, body: Mapping[str, Any]) -> None:
        """The modal was closed without sending: the server is told the person cancelled."""
        place = read_place(payload_field(body, "view", "private_metadata"))
        user = payload_field(body, "user", "id")
        if place is None or user is None:
            return
        try:
            outcome = await answer_input(self._agent, place.request_id, user, Cancel())
        except Exception:
            logger.exception("cancelling request for input %s failed", place.request_id)
            return
        if not outcome.changed:
            # Closing a form that was already answered, or is over, needs no note.
            logger.info("closing the form of %s changed nothing: %s", place.request_id, outcome.note)
        await self._after(outcome, place)

    async def _note(
        self,
        place: ModalPlace,
        user: str,
        blocks: list[dict[str, Any]],
        note: str,
        outcome: InputOutcome | None = None,
    ) -> dict[str, Any] | None:
        """Why a submission changed nothing: in the modal, or (with no input to show it on) in the thread."""
        if outcome is not None:
            self._spawn(self._after(outcome, place))
        block = first_input(blocks)
        if block is not None:
            return {"response_action": "errors", "errors": {block: note}}
        await self._poster.tell(place.channel, user, note, place.thread_ts)
        return None


def _message_of(place: ModalPlace) -> tuple[str, str] | None:
    return None if place.channel is None or place.message_ts is None else (place.channel, place.message_ts)

"""Clicks and modal submissions that answer a server's request for input.

"Fill in" opens the form in a modal: Slack accepts `views.open` only within 3 seconds of the click
(its `trigger_id`), so the click asks the core whether this person may answer and opens the modal
at once, before anything else. A submission is checked by the core (the same rules on every
surface); what is wrong comes back into the open modal next to its field, in Slack's response to
the submission itself. "Decline", closing the modal ("cancel") and "Open" (URL mode: opening the
link is the consent the server asked for) answer the request directly. Every answer goes through
`Agent.answer`; a form is first looked at for this person (`Agent.open_input`), to open or read
it. Anything that changes nothing is told only to the clicker, ephemerally.

An answer updates the request's message at once: a question that parked its turn has no turn
waiting to do it (a live one's turn shows the same outcome, and the message changes once). When
the answer was the last thing a parked turn waited for, the turn goes on exactly as after the
last approval click, in the background: the answer in its thread, then the messages that waited.
A click on a request that is over takes its message's buttons off too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.common.settle import answer_input, ended
from adapters.common.tasks import Spawn
from adapters.slack.clicks import click_of, payload_field
from adapters.slack.input_posts import RequestMessages
from adapters.slack.input_view import (
    ModalPlace,
    error_blocks,
    first_input,
    input_modal,
    parse_click,
    read_answer,
    read_place,
)
from adapters.slack.post import Poster, api_error
from bot.agent import Agent
from bot.types import Cancel, Decline, InputOutcome, LinkOpened, Submit

logger = logging.getLogger(__name__)

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
        self._messages.keep_refs(agent.ask_posted)
        # What goes on with a parked turn once nothing is left to wait for (as after approvals).
        self._resume = resume
        self._spawn = spawn

    # --- buttons on the thread message ----------------------------------------------------------

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """One `block_actions` delivery on a request's message (already acked)."""
        pressed = click_of(body)
        click = parse_click(pressed.action)
        user, channel, thread, message = pressed.user, pressed.channel, pressed.thread, pressed.message
        if click is None or user is None:
            logger.warning(
                "ignored a click that is not on a request for input: %s", pressed.action.get("action_id")
            )
            return
        place = ModalPlace(request_id=click.request_id, channel=channel, thread_ts=thread, message_ts=message)
        try:
            if click.choice == "fill":
                outcome = await self._fill(click.request_id, user, payload_field(body, "trigger_id"), place)
            elif click.choice == "open":
                # URL mode: the person opened the link (Slack opens it in their browser), so they agreed.
                outcome = await answer_input(self._agent, click.request_id, user, LinkOpened())
            else:
                outcome = await answer_input(self._agent, click.request_id, user, Decline())
        except Exception:
            logger.exception("answering request for input %s failed", click.request_id)
            outcome = InputOutcome(changed=False, request=None, note=FAILED)
        if outcome.changed:
            await self._answered(outcome, place)
            return
        if outcome.note is not None:
            await self._tell(channel, user, thread, outcome.note)
        await self._show_ended(outcome, place)

    async def _fill(self, request_id: str, user: str, trigger: str | None, place: ModalPlace) -> InputOutcome:
        """Open the form for its person; a note for anyone else (or when it is over)."""
        outcome = await self._agent.open_input(request_id, user)
        request = outcome.request
        if outcome.note is not None or request is None:
            return outcome if outcome.note is not None else replace(outcome, note=FAILED)
        if request.mode != "form" or request.form is None or trigger is None:
            return replace(outcome, note=FAILED)
        try:
            await self._poster.client.views_open(trigger_id=trigger, view=input_modal(request, place))
        except SlackApiError as exc:
            logger.warning("could not open the form of request %s: %s", request_id, api_error(exc))
            return replace(outcome, note=NO_FORM)
        return outcome

    async def _answered(self, outcome: InputOutcome, place: ModalPlace) -> None:
        """After an answer that counted: its message shows it, then a parked turn with nothing left
        to wait for goes on (its answer comes after its question's outcome in the thread)."""
        if outcome.request is not None and outcome.status is not None:
            await self._messages.settle(outcome.request, outcome.status, _message_of(place))
        if outcome.resume is not None:
            await self._resume(outcome.resume)

    async def _show_ended(self, outcome: InputOutcome, place: ModalPlace) -> None:
        """A click on a request that is over: its message says how it ended, without buttons."""
        status = ended(outcome)
        if outcome.request is not None and status is not None:
            await self._messages.settle(outcome.request, status, _message_of(place))

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
        self._spawn(self._answered(outcome, place))
        return None

    async def on_close(self, body: Mapping[str, Any]) -> None:
        """The modal was closed without sending: the server is told the person cancelled."""
        view = body.get("view")
        place = read_place(view.get("private_metadata") if isinstance(view, Mapping) else None)
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
            await self._show_ended(outcome, place)
            return
        await self._answered(outcome, place)

    async def _note(
        self,
        place: ModalPlace,
        user: str,
        blocks: list[dict[str, Any]],
        note: str,
        outcome: InputOutcome | None = None,
    ) -> dict[str, Any] | None:
        """Why a submission changed nothing: in the modal, or (without an input to show it on) as a
        note in the thread, closing the modal. A request that is over shows so on its message too."""
        if outcome is not None:
            self._spawn(self._show_ended(outcome, place))
        block = first_input(blocks)
        if block is not None:
            return {"response_action": "errors", "errors": {block: note}}
        await self._tell(place.channel, user, place.thread_ts, note)
        return None

    async def _tell(self, channel: str | None, user: str, thread: str | None, text: str) -> None:
        """A note only this person sees."""
        await self._poster.tell(channel, user, text, thread)


def _message_of(place: ModalPlace) -> tuple[str, str] | None:
    """Where the request's message is, as the click (or the modal opened from it) said."""
    if place.channel is None or place.message_ts is None:
        return None
    return place.channel, place.message_ts

"""Clicks and modal submissions that answer a server's request for input.

"Fill in" opens the form in a modal: Slack accepts `views.open` only within 3 seconds of the click
(its `trigger_id`), so the click asks the core whether this person may answer and opens the modal
at once, before anything else. A submission is checked by the core (the same rules on every
surface); what is wrong comes back into the open modal next to its field, in Slack's response to
the submission itself. "Decline", closing the modal ("cancel") and "Open" (URL mode: opening the
link is the consent the server asked for) answer the request directly. Anything that changes
nothing is told only to the clicker, ephemerally. The request's message in the thread is updated
by the waiting turn, whichever way the request ended.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.slack.decisions import _field
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
from bot.types import InputAnswer

logger = logging.getLogger(__name__)

FAILED = "Sorry — something went wrong on my side with that; please try again."
NO_FORM = "Sorry — Slack did not let me open the form in time; please click “Fill in” again."


class InputClicks:
    """Turns clicks, submissions and dismissals into answers for the core."""

    def __init__(self, agent: Agent, poster: Poster) -> None:
        self._agent = agent
        self._poster = poster

    # --- buttons on the thread message ----------------------------------------------------------

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """One `block_actions` delivery on a request's message (already acked)."""
        actions = body.get("actions")
        action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        click = parse_click(action)
        user = _field(body, "user", "id")
        channel = _field(body, "channel", "id") or _field(body, "container", "channel_id")
        thread = _field(body, "message", "thread_ts") or _field(body, "container", "thread_ts")
        if click is None or user is None:
            logger.warning("ignored a click that is not on a request for input: %s", action.get("action_id"))
            return
        place = ModalPlace(request_id=click.request_id, channel=channel, thread_ts=thread)
        try:
            if click.choice == "fill":
                note = await self._fill(click.request_id, user, _field(body, "trigger_id"), place)
            elif click.choice == "open":
                note = await self._open_link(click.request_id, user)
            else:
                declined = InputAnswer(action="decline")
                outcome = await self._agent.answer_input(click.request_id, user, declined)
                note = outcome.note if not outcome.changed else None
        except Exception:
            logger.exception("answering request for input %s failed", click.request_id)
            note = FAILED
        if note is not None:
            await self._tell(channel, user, thread, note)

    async def _fill(self, request_id: str, user: str, trigger: str | None, place: ModalPlace) -> str | None:
        """Open the form for its person; a note for anyone else (or when it is over)."""
        outcome = await self._agent.open_input(request_id, user)
        request = outcome.request
        if outcome.note is not None or request is None:
            return outcome.note or FAILED
        if request.mode != "form" or request.form is None or trigger is None:
            return FAILED
        try:
            await self._poster.client.views_open(trigger_id=trigger, view=input_modal(request, place))
        except SlackApiError as exc:
            logger.warning("could not open the form of request %s: %s", request_id, api_error(exc))
            return NO_FORM
        return None

    async def _open_link(self, request_id: str, user: str) -> str | None:
        """URL mode: the person opened the link (Slack opens it in their browser), so they agreed."""
        outcome = await self._agent.open_input(request_id, user)
        if outcome.note is not None or outcome.request is None:
            return outcome.note or FAILED
        answered = await self._agent.answer_input(request_id, user, InputAnswer(action="accept"))
        return answered.note if not answered.changed else None

    # --- the modal ------------------------------------------------------------------------------

    async def on_submit(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """A submitted modal: None to close it, or Slack's `errors` response to keep it open."""
        view = body.get("view")
        view = view if isinstance(view, Mapping) else {}
        place = read_place(view.get("private_metadata"))
        user = _field(body, "user", "id")
        blocks = [b for b in view.get("blocks") or [] if isinstance(b, dict)]
        if place is None or user is None:
            return None
        try:
            opened = await self._agent.open_input(place.request_id, user)
            request = opened.request
            if opened.note is not None or request is None or request.form is None:
                return await self._note(place, user, blocks, opened.note or FAILED)
            state = view.get("state")
            values = state.get("values") if isinstance(state, Mapping) else None
            content = read_answer(request.form, values)
            outcome = await self._agent.answer_input(
                place.request_id, user, InputAnswer(action="accept", content=content)
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
            return await self._note(place, user, blocks, outcome.note or FAILED)
        return None

    async def on_close(self, body: Mapping[str, Any]) -> None:
        """The modal was closed without sending: the server is told the person cancelled."""
        view = body.get("view")
        place = read_place(view.get("private_metadata") if isinstance(view, Mapping) else None)
        user = _field(body, "user", "id")
        if place is None or user is None:
            return
        try:
            outcome = await self._agent.answer_input(place.request_id, user, InputAnswer(action="cancel"))
        except Exception:
            logger.exception("cancelling request for input %s failed", place.request_id)
            return
        if not outcome.changed:
            # Closing a form that was already answered, or is over, needs no note.
            logger.info("closing the form of %s changed nothing: %s", place.request_id, outcome.note)

    async def _note(
        self, place: ModalPlace, user: str, blocks: list[dict[str, Any]], note: str
    ) -> dict[str, Any] | None:
        """Why a submission changed nothing: in the modal, or (without an input to show it on) as a
        note in the thread, closing the modal."""
        block = first_input(blocks)
        if block is not None:
            return {"response_action": "errors", "errors": {block: note}}
        await self._tell(place.channel, user, place.thread_ts, note)
        return None

    async def _tell(self, channel: str | None, user: str, thread: str | None, text: str) -> None:
        """A note only this person sees."""
        if channel is None:
            return
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread is not None:
            kwargs["thread_ts"] = thread
        try:
            await self._poster.client.chat_postEphemeral(**kwargs)
        except SlackApiError as exc:
            logger.warning("could not tell %s about their request for input: %s", user, api_error(exc))

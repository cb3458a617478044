"""Clicks in a thread: who clicked which button, on which message, in which thread; and Slack's side
of the approval desk (`adapters.common.desk`).

An approval click is acked at once and decided in the background; if it changes nothing only the
clicker sees why, else the approval message is updated in place (a click has no answer of its own).
A feedback vote that cannot be read is logged and dropped: feedback never fails anything.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from slack_sdk.errors import SlackApiError

from adapters.common.desk import AskDesk
from adapters.common.refs import parse_message_ref
from adapters.slack.approval_view import approval_message, parse_click
from adapters.slack.client import TeamEntry, no_team
from adapters.slack.events import PLATFORM, typed_in
from adapters.slack.post import Poster, api_error
from adapters.slack.render import escape
from bot.agent import Feedback
from bot.text import scrub
from bot.types import ApprovalPrompt, ConversationKey, Incoming

logger = logging.getLogger(__name__)


def payload_field(body: Mapping[str, Any], *path: str) -> str | None:
    """A string (or number) at `path` in the payload, scrubbed; None when absent or empty."""
    value: Any = body
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return scrub(str(value)) if isinstance(value, str | int) and str(value) else None


@dataclass(frozen=True, slots=True)
class Click:
    action: dict[str, Any]
    user: str | None
    channel: str | None
    thread: str | None
    message: str | None


def click_of(body: Mapping[str, Any]) -> Click:
    actions = body.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    return Click(
        action=action,
        user=payload_field(body, "user", "id"),
        channel=payload_field(body, "channel", "id") or payload_field(body, "container", "channel_id"),
        thread=payload_field(body, "message", "thread_ts") or payload_field(body, "container", "thread_ts"),
        message=payload_field(body, "message", "ts") or payload_field(body, "container", "message_ts"),
    )


def pressed_in(body: Mapping[str, Any]) -> tuple[Click, Incoming] | None:
    """A button press, and who pressed it where as a slash command's `Incoming` (`typed_in`); None
    when the payload names no presser or channel."""
    pressed = click_of(body)
    if pressed.user is None or pressed.channel is None:
        return None
    team = payload_field(body, "team", "id") or payload_field(body, "user", "team_id") or ""
    return pressed, typed_in({"channel_id": pressed.channel, "user_id": pressed.user, "team_id": team})


# A button's work: who pressed it where, what its action id names after the prefix, its value; what
# the presser is told.
Act = Callable[[Incoming, str, str], Awaitable[str]]


async def tell_presser(poster: Poster, body: Mapping[str, Any], prefix: str, act: Act, failed: str) -> None:
    """A button of a list only its person sees (already acked): `act` does what it names, and what it
    says (`failed` when it fails) is told to the presser alone."""
    found = pressed_in(body)
    if found is None:
        return
    pressed, here = found
    what = str(pressed.action.get("action_id") or "").removeprefix(f"{prefix}.")
    try:
        text = await act(here, what, str(pressed.action.get("value") or ""))
    except Exception:
        logger.exception("a %s button failed for %s", prefix, here.user_id)
        text = failed
    await poster.tell(pressed.channel, here.user_id, escape(text), pressed.thread)


@dataclass(frozen=True, slots=True)
class SlackApprovals:
    """Redraws approval messages where they are stored (`chat.update`), with their workspace's token."""

    poster: Poster
    enter: TeamEntry = no_team

    async def edit(self, ref: str, prompt: ApprovalPrompt) -> None:
        where = parse_message_ref(ref)
        if where is None:
            return
        try:
            async with self.enter(prompt.key.workspace):
                await self.poster.update(where[0], where[1], approval_message(prompt))
        except SlackApiError as exc:
            logger.warning("could not update approval message %s: %s", ref, api_error(exc))


@dataclass(frozen=True, slots=True)
class _Clicker:
    """The person who clicked, told things only they see (`chat.postEphemeral`)."""

    poster: Poster
    pressed: Click

    async def tell(self, text: str) -> None:
        assert self.pressed.user is not None
        await self.poster.tell(self.pressed.channel, self.pressed.user, text, self.pressed.thread)

    async def show(self, prompt: ApprovalPrompt) -> bool:
        return False  # a click has no answer of its own on Slack: the message is edited instead


async def on_click(desk: AskDesk, poster: Poster, body: Mapping[str, Any]) -> None:
    """One `block_actions` delivery on an approval message (already acked)."""
    pressed = click_of(body)
    click = parse_click(pressed.action)
    if click is None or pressed.user is None:
        logger.warning("ignored a button click that is not an approval: %s", pressed.action.get("action_id"))
        return
    await desk.clicked(click, pressed.user, _Clicker(poster, pressed))


@runtime_checkable
class FeedbackStore(Protocol):
    async def record_feedback(self, feedback: Feedback) -> None: ...


def parse_feedback(body: Mapping[str, Any]) -> Feedback | None:
    """The vote a `block_actions` body on the feedback buttons carries, or None if it is not one."""
    pressed = click_of(body)
    rating, _, event_id = (payload_field(pressed.action, "value") or "").partition("|")
    user, channel, message_ts, thread = pressed.user, pressed.channel, pressed.message, pressed.thread
    team = payload_field(body, "team", "id") or payload_field(body, "user", "team_id")
    if rating not in ("up", "down") or not (user and team and channel and message_ts and thread):
        return None
    key = ConversationKey(platform=PLATFORM, workspace=team, channel=channel, thread=thread)
    return Feedback(
        key=key,
        message_ts=message_ts,
        user_id=user,
        rating="up" if rating == "up" else "down",
        event_id=event_id or None,
    )


async def record_click(store: FeedbackStore, body: Mapping[str, Any]) -> None:
    feedback = parse_feedback(body)
    if feedback is None:
        logger.warning("ignored a feedback click that could not be read")
        return
    try:
        await store.record_feedback(feedback)
    except Exception:
        logger.exception("could not store feedback on %s in %s", feedback.message_ts, feedback.key)

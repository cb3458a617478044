"""Slack's side of the approval desk (`adapters.common.desk`): clicks, redraws and notes.

A click is acked at once and worked in the background: the shared desk decides it through the
core; if it changes nothing, only the clicker sees why (an ephemeral note); if it does, the
approval message is updated in place (Slack has no answer through the click itself: `chat.update`
on the stored message), and once every call is decided the turn goes on and answers in its thread.
A turn parked on a server's questions goes on the same way after their last answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.common.desk import ApprovalClick, AskDesk
from adapters.common.refs import parse_message_ref
from adapters.slack.approval_view import approval_message, parse_click
from adapters.slack.clicks import click_of
from adapters.slack.post import Poster, api_error
from bot.types import ApprovalPrompt

logger = logging.getLogger(__name__)


class SlackApprovals:
    """Redraws approval messages where they are stored (`chat.update`)."""

    def __init__(self, poster: Poster) -> None:
        self._poster = poster

    async def edit(self, ref: str, prompt: ApprovalPrompt) -> None:
        where = parse_message_ref(ref)
        if where is None:
            return
        try:
            await self._poster.update(where[0], where[1], approval_message(prompt))
        except SlackApiError as exc:
            logger.warning("could not update approval message %s: %s", ref, api_error(exc))


class _Clicker:
    """The person who clicked, told things only they see (`chat.postEphemeral`)."""

    def __init__(self, poster: Poster, channel: str | None, user: str, thread: str | None) -> None:
        self._poster = poster
        self._where = channel, user, thread

    async def tell(self, text: str) -> None:
        channel, user, thread = self._where
        await self._poster.tell(channel, user, text, thread)

    async def show(self, prompt: ApprovalPrompt) -> bool:
        return False  # a click has no answer of its own on Slack: the message is edited instead


async def on_click(desk: AskDesk, poster: Poster, body: Mapping[str, Any]) -> None:
    """One `block_actions` delivery on an approval message (already acked)."""
    pressed = click_of(body)
    click = parse_click(pressed.action)
    if click is None or pressed.user is None:
        logger.warning("ignored a button click that is not an approval: %s", pressed.action.get("action_id"))
        return
    await desk.clicked(click, pressed.user, _Clicker(poster, pressed.channel, pressed.user, pressed.thread))


__all__ = ["ApprovalClick", "SlackApprovals", "on_click"]

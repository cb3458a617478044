"""👀 on the person's post: the sign a mention was taken, while the answer is on its way.

Slack paces posts per channel, so in a busy channel a status message shows up late and takes an
answer's slot, while reactions are limited per workspace. It goes once the answer is posted; a
workspace that refuses reactions is asked no more.
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.events import Turn, is_dm_channel
from adapters.slack.post import api_error

logger = logging.getLogger(__name__)

SEEN_REACTION = "eyes"
# What Slack answers when the reaction is already there, or already gone: nothing to do.
_SETTLED = frozenset({"already_reacted", "no_reaction", "message_not_found"})
# The app may not react at all (scope missing, token type): stop asking, say so once.
_REFUSED = frozenset({"missing_scope", "not_allowed_token_type", "no_permission", "invalid_name"})


class SeenMarks:
    """Adds and removes the 👀 of each turn; remembers a refusal of reactions."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._refused = False

    def mark(self, turn: Turn) -> asyncio.Task[bool] | None:
        """Start showing 👀 in the background; None in a DM (its own status) or with no post."""
        if self._refused or turn.message_ts is None or is_dm_channel(turn.channel):
            return None
        return asyncio.create_task(self.call("add", turn.channel, turn.message_ts))

    async def clear(self, turn: Turn, adding: asyncio.Task[bool]) -> None:
        """Take the reaction away (after it landed, so a late add cannot put it back)."""
        try:
            added = await adding
        except asyncio.CancelledError:
            return
        if added and turn.message_ts is not None:
            await self.call("remove", turn.channel, turn.message_ts)

    async def call(self, method: str, channel: str, ts: str) -> bool:
        """reactions.add / reactions.remove; True when Slack did it (or it was already so)."""
        if self._refused:
            return False
        try:
            react = self._client.reactions_add if method == "add" else self._client.reactions_remove
            await react(channel=channel, timestamp=ts, name=SEEN_REACTION)
        except Exception as exc:  # a network failure costs the sign, never the turn
            error = api_error(exc) if isinstance(exc, SlackApiError) else ""
            if error in _SETTLED:
                return True
            if error in _REFUSED:
                self._refused = True
                logger.warning(
                    "Slack refused reactions (%s): mentions get no 👀 until the app has the "
                    "reactions:write scope (reinstall it from slack/manifest.*.yaml)",
                    error,
                )
                return False
            reason = error or (exc if isinstance(exc, SlackApiError) else type(exc).__name__)
            logger.info("could not %s the 👀 reaction in %s: %s", method, channel, reason)
            return False
        return True

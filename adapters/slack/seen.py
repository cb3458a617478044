"""👀 on a person's post while nerve works on it: the sign that a mention was taken, within a moment.

Slack paces posts per channel, so in a busy channel a status message shows up late and takes a slot
an answer needs; reactions are limited per workspace, so every mention gets its sign at once. The
reaction goes once the answer is posted; a turn cut off by a shutdown keeps it until the next start
answers it. All best effort: a failed reaction is a log line, and a workspace that refuses them (no
`reactions:write`) is asked no more.
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
    """Adds and removes the 👀 of each turn, for one bot; remembers a refusal of reactions."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._refused = False

    def mark(self, turn: Turn) -> SeenMark | None:
        """Start showing 👀 on the post of `turn` (in the background), or None where no sign is due:
        direct messages show their own status, and a turn taken back from the store has no post."""
        if self._refused or turn.message_ts is None or is_dm_channel(turn.channel):
            return None
        return SeenMark(self, turn.channel, turn.message_ts)

    async def call(self, method: str, channel: str, ts: str) -> bool:
        """reactions.add / reactions.remove; True when Slack did it (or it was already so)."""
        if self._refused:
            return False
        try:
            if method == "add":
                await self._client.reactions_add(channel=channel, timestamp=ts, name=SEEN_REACTION)
            else:
                await self._client.reactions_remove(channel=channel, timestamp=ts, name=SEEN_REACTION)
        except SlackApiError as exc:
            error = api_error(exc)
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
            logger.info("could not %s the 👀 reaction in %s: %s", method, channel, error or exc)
            return False
        except Exception as exc:  # a network failure costs the sign, never the turn
            logger.info("could not %s the 👀 reaction in %s: %s", method, channel, type(exc).__name__)
            return False
        return True


class SeenMark:
    """The 👀 of one turn: added in the background at once, removed after the answer."""

    def __init__(self, marks: SeenMarks, channel: str, ts: str) -> None:
        self._marks = marks
        self._channel = channel
        self._ts = ts
        self._adding: asyncio.Task[bool] = asyncio.create_task(marks.call("add", channel, ts))

    async def clear(self) -> None:
        """Take the reaction away (after it landed, so a late add cannot put it back)."""
        try:
            added = await self._adding
        except asyncio.CancelledError:
            return
        if added:
            await self._marks.call("remove", self._channel, self._ts)

"""The time zone each person's Slack profile names (`users.info` → `tz`): the hint their turns carry
(`Incoming.time_zone`), so "tomorrow at 9" means 9 where they are unless they set a zone themselves.

Asked once per person for a while (`KEEP_SECONDS`), not at every message. Slack not answering, or the
app lacking `users:read`, costs the hint only, never a turn.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.post import api_error

logger = logging.getLogger(__name__)

# How long a person's zone is taken as known (a profile's zone changes rarely), and how long a
# failed look-up is not tried again.
KEEP_SECONDS = 3600.0
RETRY_SECONDS = 300.0
# People remembered at most; the least recently asked are forgotten first.
KEPT_PEOPLE = 10_000
_REFUSED = frozenset({"missing_scope", "not_allowed_token_type", "no_permission"})


class UserZones:
    """The zone of each Slack user, from their profile; None when Slack does not say."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        keep: float = KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._keep = keep
        self._clock = clock
        self._known: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._refused = False

    async def of(self, user: str) -> str | None:
        """`user`'s zone ("Europe/Paris"), or None: unknown, or Slack could not be asked."""
        if not user or self._refused:
            return None
        now = self._clock()
        known = self._known.get(user)
        if known is not None and known[1] > now:
            self._known.move_to_end(user)
            return known[0]
        zone, keep = await self._ask(user)
        self._known[user] = (zone, now + keep)
        self._known.move_to_end(user)
        while len(self._known) > KEPT_PEOPLE:
            self._known.popitem(last=False)
        return zone

    async def _ask(self, user: str) -> tuple[str | None, float]:
        try:
            found = await self._client.users_info(user=user)
        except Exception as exc:  # any failure costs the hint, never the turn
            error = api_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
            if error in _REFUSED:
                self._refused = True
                logger.warning(
                    "Slack refused users.info (%s): people's time zones come from their own setting"
                    " (/nerve timezone) until the app has the users:read scope",
                    error,
                )
            else:
                logger.info("could not read the time zone of %s: %s", user, error)
            return None, RETRY_SECONDS
        profile = found.get("user")
        zone = profile.get("tz") if isinstance(profile, dict) else None
        return (str(zone) if isinstance(zone, str) and zone else None), self._keep

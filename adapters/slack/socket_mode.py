"""The Socket Mode connection, and what the log says about it.

slack_sdk's client logs each failed reconnect at ERROR, with a traceback, every ping interval;
`ConnectionLog` turns that into one WARNING when the connection is lost and one INFO when it is back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

logger = logging.getLogger(__name__)
CLIENT_LOGGER = f"{__name__}.client"
# slack_sdk's default: how often the client pings, and retries while the connection is down.
PING_SECONDS = 10.0
# What the client says when a listener (nerve's own handling) failed: not the connection's state,
# so passed on as the client logs it.
LISTENER_FAILURES = ("Failed to process a message", "Failed to run")
ESTABLISHED = "has been established"
MAX_REASON = 300
# The client's session ids, `(s_-12345)` or bare, and the `()` of a session it no longer has.
_SESSION = re.compile(r"\s*\((?:s_-?\d+)?\)|\s*\bs_-?\d+")


class ConnectionLog(logging.Filter):
    """Keeps the client's lines at DEBUG and says instead when the connection is lost and is back."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._every = every
        self._clock = clock
        self._lost_at: float | None = None
        self._failures = 0

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.levelno <= logging.DEBUG or text.startswith(LISTENER_FAILURES):
            return True
        if record.levelno >= logging.WARNING:
            self._failures += 1
            if self._lost_at is None:
                self._lost_at = self._clock()
                logger.warning(
                    "Slack: Socket Mode connection lost (%s); reconnecting every %g s until it is back",
                    reason(text),
                    self._every,
                )
        elif ESTABLISHED in text and self._lost_at is not None:
            away = self._clock() - self._lost_at
            attempts = f"{self._failures} failed attempt{'s' if self._failures != 1 else ''}"
            logger.info("Slack: Socket Mode connection is back after %.0f s (%s)", away, attempts)
            self._lost_at = None
            self._failures = 0
        logger.debug("socket mode client: %s", text, exc_info=record.exc_info)
        return False


def reason(text: str) -> str:
    """The client's message as a reason: first line, without session ids or 'Reconnecting...'."""
    first = _SESSION.sub("", text.strip().splitlines()[0] if text.strip() else "no reason given")
    for tail in ("; Retrying...", " Reconnecting...", "Reconnecting..."):
        first = first.removesuffix(tail)
    first = first.strip().rstrip(".")
    return first if len(first) <= MAX_REASON else f"{first[:MAX_REASON]}…"


def socket_mode_handler(
    app: AsyncApp, app_token: str, client: AsyncWebClient, *, ping_interval: float = PING_SECONDS
) -> AsyncSocketModeHandler:
    """bolt's Socket Mode handler for `app`, its client's logger with a fresh `ConnectionLog`."""
    client_log = logging.getLogger(CLIENT_LOGGER)
    for old in [f for f in client_log.filters if isinstance(f, ConnectionLog)]:
        client_log.removeFilter(old)
    client_log.addFilter(ConnectionLog(ping_interval))
    return AsyncSocketModeHandler(
        app, app_token=app_token, web_client=client, logger=client_log, ping_interval=ping_interval
    )

"""A delivery the database cannot record in time is refused with a 503, so Slack delivers it again.

Slack waits 3 s for the answer to a delivery, then counts it failed and retries it (after about a
second, a minute, five minutes). The intake records each turn in the inbox before acking it; with
the database unreachable, that write would wait for the pool's connection (30 s) and end in a 500
long after Slack gave up. So the intake waits at most `INTAKE_WAIT_SECONDS` and then answers 503
with Retry-After at once: nothing was recorded, Slack retries, and the retry that reaches a
database that is back is recorded and answered. A delivery acked with a 200 is always recorded, so
every delivery Slack was told succeeded is answered.
"""

from __future__ import annotations

import logging

from slack_bolt.response import BoltResponse

from bot.errors import StoreError
from bot.observe.log_throttle import LogThrottle

logger = logging.getLogger(__name__)

# How long the intake waits for the database before refusing a delivery: well within Slack's 3 s.
INTAKE_WAIT_SECONDS = 2.0
# What the 503 asks Slack to wait before its retry.
RETRY_AFTER_SECONDS = 5
# While the database is away, one line this often, with a count of the deliveries refused since.
_lines = LogThrottle(every=10.0)


def unrecorded(event_id: str, exc: BaseException) -> BoltResponse:
    """The answer to a delivery the inbox could not record (`exc`): 503 with Retry-After."""
    if isinstance(exc, StoreError):
        reason = exc.message
    else:
        reason = f"the database gave no connection within {INTAKE_WAIT_SECONDS:g} s"
    _say(
        "refused",
        "could not record Slack event %s (database unreachable: %s): answered 503 so Slack delivers it again",
        event_id,
        reason,
    )
    return BoltResponse(status=503, body="", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def left_to_sweep(event_id: str) -> None:
    """A recorded delivery whose job could not be queued in time: the sweep queues it later."""
    _say(
        "left to the sweep",
        "recorded Slack event %s but could not queue its job within %g s (database unreachable): it is"
        " queued by the sweep once the database is back",
        event_id,
        INTAKE_WAIT_SECONDS,
    )


def _say(kind: str, message: str, *args: object) -> None:
    """One WARNING per kind every 10 s, with the count of the ones held back since."""
    held = _lines.allow(kind)
    if held is not None:
        more = f" ({held} more {kind} since the last line)" if held else ""
        logger.warning(message + "%s", *args, more)

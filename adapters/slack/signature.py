"""Is this HTTP delivery from Slack? The request signature, checked over the raw bytes.

Checked before anything decodes or parses the body: Slack signs bytes, and a body that is not valid
UTF-8 must still verify before it is decoded with replacement. Every malformed header is a plain
refusal with a reason for the log, never an exception (a non-numeric timestamp used to be a 500).
"""

from __future__ import annotations

import hashlib
import hmac
import re

# Slack refuses to accept replays older than five minutes; so do we.
MAX_AGE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def signature_problem(
    secret: str, raw: bytes, timestamp: str | None, signature: str | None, *, now: float
) -> str | None:
    """None when `raw` was signed with `secret` within the last five minutes; else what is wrong."""
    if not timestamp:
        return "no X-Slack-Request-Timestamp header"
    if not signature:
        return "no X-Slack-Signature header"
    if _TIMESTAMP.fullmatch(timestamp) is None:
        return "X-Slack-Request-Timestamp is not a number of seconds"
    if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
        return "X-Slack-Request-Timestamp is more than five minutes away (a replay, or a wrong clock)"
    if _SIGNATURE.fullmatch(signature) is None:
        return "X-Slack-Signature is not of the form v0=<64 hex digits>"
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, hashlib.sha256)
    if not hmac.compare_digest("v0=" + digest.hexdigest(), signature):
        return "X-Slack-Signature does not match the body (wrong SLACK_SIGNING_SECRET, or not Slack)"
    return None

"""Approvals: the notes a click on an approval gets when it changes nothing, and the ids of requests.

The rules are pure (`bot.policy`); the turn screens its calls (`bot.turn.loop`); `Parking.decide`
turns a click into a decision, or into one of these notes saying why nothing changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

Clock = Callable[[], float]

NOT_YOURS = "Only the person who asked, or an admin, can decide on these calls."
ALREADY_DECIDED = "This call was already decided{by}; nothing changed."
EXPIRED = "This request has expired; nothing changed."
GONE = "This approval request no longer exists."
CHANGED = "This call is not the one that was shown for approval; nothing changed."


def new_request_id() -> str:
    """Short, unguessable, and safe inside the ids a platform's buttons carry back (short ASCII)."""
    return secrets.token_urlsafe(12)

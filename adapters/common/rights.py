"""What forgetting a person did, in words every surface and the command line say the same way."""

from __future__ import annotations

from bot.agent import Forgotten

# Each count of `Forgotten`, as a line says it (the number goes first).
_WORDS = {
    "memories": ("memory about you deleted", "memories about you deleted"),
    "place_memories": (
        "memory you saved for a place kept without your name",
        "memories you saved for places kept without your name",
    ),
    "conversations": ("private conversation deleted", "private conversations deleted"),
    "messages": (
        "message in shared threads replaced by a note",
        "messages in shared threads replaced by a note",
    ),
    "answers": ("answer to them replaced too", "answers to them replaced too"),
    "sign_ins": ("sign-in to a server ended", "sign-ins to servers ended"),
    "waiting": ("waiting request or question deleted", "waiting requests and questions deleted"),
    "inbox": ("unanswered message dropped", "unanswered messages dropped"),
    "feedback": ("vote on an answer deleted", "votes on answers deleted"),
}

NOTHING_STORED = "Nothing was stored about you: nothing to delete."
AUDIT_KEPT = "The approvals audit keeps who decided which tool call and when, without any text."


def forgotten_lines(found: Forgotten) -> list[str]:
    """One line per kind of data that was there ("3 private conversations deleted"); the counts that
    are zero are left out, and a person with nothing stored gets one line saying so."""
    lines = []
    for name, count in found.counts().items():
        if count:
            one, many = _WORDS[name]
            lines.append(f"{count} {one if count == 1 else many}")
    return lines or [NOTHING_STORED]

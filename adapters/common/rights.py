"""What forgetting a person did, in words every surface and the command line say the same way."""

from __future__ import annotations

import json
from typing import Any

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
    "schedules": ("schedule deleted, with its runs", "schedules deleted, with their runs"),
    "settings": ("setting of yours deleted (your time zone)", "settings of yours deleted"),
    "files": ("shared file deleted", "shared files deleted"),
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


# The words of the forget and export commands on Slack, Discord and the terminal.
FORGET_QUESTION = (
    "Delete everything stored about you: your memories, our private conversations and your sign-ins;"
    " your messages in shared threads are replaced by a note. This cannot be undone. Go ahead?"
)
CONFIRM_FORGET = "Delete everything"
CANCEL_FORGET = "Cancel"
NOTHING_DELETED = "Nothing deleted: all of it is kept."
NOT_YOURS = "This button is for the person who asked: use the command yourself to delete your own data."
FORGET_FAILED = "Sorry — I could not delete your data; nothing may have changed. Please try again."
EXPORT_FAILED = "Sorry — I could not put your data together; please try again."
EXPORT_NAME = "nerve-export.json"
EXPORT_TITLE = "Everything nerve stores about you"


def forgotten_text(found: Forgotten) -> str:
    """The reply after forgetting: what went, a line each, and what the audit keeps."""
    return "\n".join(["Deleted:", *(f"• {line}" for line in forgotten_lines(found)), AUDIT_KEPT])


def export_text(document: dict[str, Any]) -> str:
    """A person's export as the file they get: readable JSON, every character as it was stored."""
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"

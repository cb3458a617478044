"""The turn's note: what changes from one turn to the next (the time now, the person's memories);
and the summary of compressed turns, which starts the first message sent after the system prompt.

It rides at the end of the turn's own message in the request, never in the system prompt: providers
cache a byte-identical start of a request (OpenAI's automatic prompt caching, Anthropic's and others'
through their OpenAI-compatible endpoints), so a system prompt that named the second would make every
request a new one, and the whole conversation after it would be sent uncached each turn. Never stored:
the stored message stays what its person wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.types import ChatMessage

# Said to the model, and found again by the offline model: the last one in a message is ours.
MARK = "\n\n[Context for this message, added by nerve, not written by the person:]\n"
# The summary of compressed turns, before the message it starts (found again by the offline model).
SUMMARY_MARK = "[Earlier conversation, summarised by nerve, not written by the person:]\n"
SUMMARY_END = "\n\n[The person's message:]\n"


def with_note(text: str, note: str) -> str:
    """`text` with the turn's note after it (as is without one)."""
    return f"{text}{MARK}{note}" if note else text


def with_summary(text: str | None, summary: str) -> str:
    """`text` after the summary of the compressed turns (the summary alone for no message)."""
    return f"{SUMMARY_MARK}{summary}" if text is None else f"{SUMMARY_MARK}{summary}{SUMMARY_END}{text}"


def split_note(text: str) -> tuple[str, str]:
    """A message's own text (without a summary before it) and the turn's note after it ("" if none)."""
    if text.startswith(SUMMARY_MARK):
        text = text.partition(SUMMARY_END)[2]
    own, found, note = text.rpartition(MARK)
    return (own, note) if found else (text, "")


def note_of(messages: Sequence[ChatMessage]) -> str:
    """The turn's note in a request ("" without one): only the turn's own message carries one."""
    for message in reversed(messages):
        if message.role == "user" and (note := split_note(message.content or "")[1]):
            return note
    return ""

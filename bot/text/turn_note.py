"""The turn's note: what changes from one turn to the next (the time now, the person's memories);
and the summary of compressed turns, which starts the first message sent after the system prompt.

Providers cache the longest byte-identical start of a request (OpenAI's automatic prompt caching,
Anthropic's and others' through their OpenAI-compatible endpoints), so the note always ends the
request: never in the system prompt, which would make every request a new one, and never in a
message a later request sends again. In a turn's first request it ends the turn's own message; once
tools have answered, it ends the latest result instead, and the turn's message is sent as its person
wrote it. A later request thus starts with everything the one before sent up to where its note
began, and an earlier turn's results stay cached; were the note kept on the turn's message, each
next request would differ from there on, and every result after it would be sent uncached.

Appended to the last message rather than sent as a message of its own: a user message after the
results would read as the person speaking again in the middle of the turn, and chat templates that
want roles to alternate, or a system message only first, refuse one. Never stored: the stored
message stays what its person wrote, the stored result what its tool returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.types import ChatMessage

# Said to the model, and found again by the offline model: the last one in a message is ours.
MARK = "\n\n[Context for this turn, added by nerve, written by neither the person nor a tool:]\n"
# The summary of compressed turns, before the message it starts (found again by the offline model).
SUMMARY_MARK = "[Earlier conversation, summarised by nerve, not written by the person:]\n"
SUMMARY_END = "\n\n[The person's message:]\n"
# The messages that can end a request, and so carry the note: the person's, and a tool's result.
CARRIERS = frozenset({"user", "tool"})


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
    """The turn's note in a request ("" without one): it ends the request's last message."""
    if messages and messages[-1].role in CARRIERS:
        return split_note(messages[-1].content or "")[1]
    return ""


def without_note(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """`messages` with the note ending the last one taken off (a result then reads as its tool wrote it)."""
    if not (note := note_of(messages)):
        return list(messages)
    last = messages[-1]
    content = last.content or ""
    return [*messages[:-1], replace(last, content=content[: len(content) - len(MARK) - len(note)])]

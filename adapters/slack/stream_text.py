"""Model text, escaped piece by piece for a message that can only grow (chat.appendStream).

An update replaces a whole message, so it can escape the text so far each time. A stream cannot take
back what it sent: a piece must already be escaped the way the finished text will be. Slack's
escaping is per character, but two rules look further: `@here` is only a ping as a whole word, and
`[label](url)` is only a disguised link once it is complete. So a piece ends after whitespace and
before any `[` that may still open a link; the rest waits for more text or for the end of the round.
"""

from __future__ import annotations

import re

from adapters.slack.render import safe_markdown

# A `[` that can still become `[label](url "title")` as more text arrives (mirrors render's _MD_LINK).
_OPEN_LINK = re.compile(r'\[[^\]\n]*(?:\](?:\(\s*<?[^)\s>]*>?(?:\s+"[^"]*"?)?\s*)?)?\Z')
_FULL_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def stable_cut(text: str, start: int = 0) -> int:
    """How much of `text` (from `start`) can be escaped now without more text changing it."""
    cut = max(text.rfind(" ", start), text.rfind("\n", start), text.rfind("\t", start)) + 1
    if cut <= start:
        return start
    line = text.rfind("\n", 0, cut - 1) + 1
    pos = text.find("[", max(line, start), cut)
    while pos != -1:
        link = _FULL_LINK.match(text, pos)
        if link is not None:
            if link.end() > cut:
                return pos  # a complete link that the cut would split
            pos = text.find("[", link.end(), cut)
            continue
        if _OPEN_LINK.match(text, pos):
            return pos  # may still become a link
        pos = text.find("[", pos + 1, cut)
    return cut


class SafePieces:
    """One round's text, handed out as escaped pieces that join up to the escaped whole."""

    def __init__(self) -> None:
        self.raw = ""
        self.cut = 0  # raw characters already handed out
        self.sent = ""  # the escaped text handed out

    def add(self, delta: str) -> None:
        self.raw += delta

    def take(self, *, final: bool) -> str:
        """The next escaped piece: what is settled, or (at the end of the round) everything left."""
        cut = len(self.raw) if final else stable_cut(self.raw, self.cut)
        if cut <= self.cut:
            return ""
        whole = safe_markdown(self.raw[:cut])
        # Escaping the longer text normally just extends what was sent; if an edge case (a code span
        # closing later) makes it differ, the new part is escaped on its own: still safe.
        piece = (
            whole[len(self.sent) :]
            if whole.startswith(self.sent)
            else safe_markdown(self.raw[self.cut : cut])
        )
        self.cut = cut
        self.sent += piece
        return piece

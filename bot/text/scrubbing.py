"""Text from outside made safe to store and show.

Lone surrogates (from `surrogateescape`d argv or JSON `"\\ud800"`) are refused by SQLite, JSON encoders
and HTTP clients; they become U+FFFD here, once, at each edge, so the rest of nerve holds only text it
can store and send.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def scrub(text: str) -> str:
    """`text` with lone surrogates replaced, so it encodes as UTF-8 everywhere."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    if all(0xDC80 <= ord(c) <= 0xDCFF for c in _SURROGATE.findall(text)):
        # surrogateescape turned undecodable argv bytes into U+DC80..U+DCFF: decode them properly.
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _SURROGATE.sub(REPLACEMENT, text)


def question_too_long(size: int, limit: int) -> str:
    """What a person is told of a question over NERVE_MAX_QUESTION_CHARS, wherever it is refused."""
    return f"Your message is {size:,} characters; the limit is {limit:,}. Please shorten it."

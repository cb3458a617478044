"""What the system prompt says is remembered, as values a question may leave out.

The core lists remembered facts under a line starting "What you remember", one `- <text>` line each
(possibly under sub-headings): the place's in the first system message, the person's in the note
that ends the request (`bot.text.turn_note`). "area code is A1001" offers
`area_code` = "A1001" (and `code`); each word of a line is also a value a tool's pattern may match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.text.turn_note import note_of
from bot.types import ChatMessage

_HEADING = re.compile(r"^[#*_\s]*what you remember\b", re.I)
_BULLET = re.compile(r"^\s*[-*•]\s+(?P<text>.*\S)\s*$")
# The section the core appends after it when a conversation grew long.
_OTHER_SECTION = re.compile(r"^summary of the earlier conversation\b", re.I)
# A note after a fact ("(saved 2026-12-07)", the id "[m3f9a2c1]" the core lists it with), not part of
# its value.
_NOTE = re.compile(r"\s*(\([^()]*\)|\[[^\[\]]*\])\s*$")
_FACT = re.compile(
    r"^(?:(?:my|our|the|their|his|her)\s+)?(?P<subject>[^\W\d][\w' -]{0,40}?)"
    r"\s*(?:\bis\b|\bare\b|=|:)\s*(?P<value>.+)$",
    re.I,
)
_TOKEN = re.compile(r"[\w.@+-]+")


def remembered_lines(messages: Sequence[ChatMessage]) -> list[str]:
    """The remembered facts of the first system message (the place's), then of the turn's note (the
    person's), in their order."""
    texts = [messages[0].content or ""] if messages and messages[0].role == "system" else []
    return [line for text in [*texts, note_of(messages)] for line in _section_lines(text)]


def _section_lines(text: str) -> list[str]:
    """The facts under a "What you remember" heading. The section ends at a line that is neither a
    fact nor a sub-heading right before facts, once a blank line came before it."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADING.match(line)), None)
    if start is None:
        return []
    found: list[str] = []
    blank = False
    for i in range(start + 1, len(lines)):
        line = lines[i].strip()
        if bullet := _BULLET.match(line):
            found.append(bullet.group("text"))
            blank = False
        elif not line:
            blank = True
        elif _OTHER_SECTION.match(line):
            break
        elif blank and not (i + 1 < len(lines) and _BULLET.match(lines[i + 1])):
            break  # prose after a blank line: the next part of the prompt
    return found


def _scalar(text: str) -> str | int | float:
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def remembered_values(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """Remembered values by the name a tool's argument may have: "home city is Paris" gives
    `home_city` and `city`; every word a line holds is there too, under a key no argument has."""
    known: dict[str, Any] = {}
    for n, line in enumerate(remembered_lines(messages)):
        text = line
        while (note := _NOTE.search(text)) and note.start() > 0:
            text = text[: note.start()]
        if fact := _FACT.match(text.rstrip(" .")):
            words = re.findall(r"[^\W\d]\w*", fact.group("subject").casefold())
            value = _scalar(fact.group("value").strip().rstrip("."))
            if words:
                known.setdefault("_".join(words), value)
                known.setdefault(words[-1], value)
        for i, token in enumerate(_TOKEN.findall(text)):
            known.setdefault(f" {n} {i}", token.strip(".-"))
    return known

"""Platform-neutral text helpers the chat adapters share, so they do not drift apart.

Chat platforms cap message length, render fenced code, and treat some `@` words as mass pings.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.text.nesting import MAX_DEPTH, TooDeep, loads

# Below this a chunk could not hold a reopened fence, a line of code and the closing fence.
MIN_SPLIT_LIMIT = 16

# CommonMark fences: up to three spaces of indent, then three or more backticks or tildes.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_BLANK_RUN = re.compile(r"[ \t]*\n")
_MASS_MENTION = re.compile(r"@(everyone|here|channel)\b", re.IGNORECASE)
_ZWSP = "\u200b"


@dataclass(frozen=True, slots=True)
class _Fence:
    marker: str
    info: str

    def closes_with(self, line: str) -> bool:
        match = _FENCE.match(line)
        if match is None or match.group(2).strip():
            return False
        closing = match.group(1)
        return closing[0] == self.marker[0] and len(closing) >= len(self.marker)


class _Lines:
    """The text's lines with the fence open before and after each, so any cut can ask its state."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] = []
        self.ends: list[int] = []  # index of the line's "\n" (or len(text) for the last line)
        self.before: list[_Fence | None] = []
        self.after: list[_Fence | None] = []
        self.is_fence: list[bool] = []
        fence: _Fence | None = None
        pos = 0
        for line in text.split("\n"):
            self.starts.append(pos)
            self.ends.append(pos + len(line))
            self.before.append(fence)
            if fence is None:
                match = _FENCE.match(line)
                # A backtick fence's info string may not contain backticks (that is inline code).
                if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                    fence = _Fence(match.group(1), match.group(2).strip())
            elif fence.closes_with(line):
                fence = None
            self.after.append(fence)
            self.is_fence.append(fence is not self.before[-1])  # this line opened or closed one
            pos += len(line) + 1

    def line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1

    def state_at(self, pos: int) -> _Fence | None:
        """The fence open at a chunk that ends at `pos` (exclusive)."""
        i = self.line_of(pos)
        # At a line's start the fence is the one before it (even for an empty line); at its end, after.
        return self.after[i] if pos >= self.ends[i] and pos != self.starts[i] else self.before[i]

    def inside_fence_line(self, pos: int) -> bool:
        i = self.line_of(pos)
        return self.is_fence[i] and self.starts[i] < pos < self.ends[i]


def _closer_len(fence: _Fence | None) -> int:
    return 0 if fence is None else len(fence.marker) + 1


def _head(fence: _Fence | None, limit: int) -> str:
    if fence is None:
        return ""
    # A long info string must not eat the chunk: reopen with the bare marker instead.
    opener = fence.marker + fence.info
    return (opener if len(opener) + len(fence.marker) + 2 <= limit // 2 else fence.marker) + "\n"


def _skip_blank_lines(text: str, pos: int) -> int:
    while (match := _BLANK_RUN.match(text, pos)) is not None:
        pos = match.end()
    return pos


def _choose_cut(lines: _Lines, start: int, room: int) -> tuple[int, int]:
    """Where this chunk ends and the next starts; `room` counts head and closing fence."""
    text = lines.text

    def fits(cut: int) -> bool:
        return start < cut and (cut - start) + _closer_len(lines.state_at(cut)) <= room

    window = text[start : start + room + 1]
    paragraphs = [start + m.start() for m in re.finditer(r"\n[ \t]*\n", window)]
    line_ends = [start + m.start() for m in re.finditer(r"\n", window)]
    spaces = [start + m.start() for m in re.finditer(r"(?<=\S)[ \t]+", window)]
    spaces = [b for b in spaces if not lines.inside_fence_line(b)]

    # Prefer a paragraph, then a line break, but not one so early that the chunk is mostly empty.
    early = room // 4
    for candidates, floor in ((paragraphs, early), (line_ends, early), (paragraphs, 0), (line_ends, 0)):
        for cut in reversed(candidates):
            if cut - start >= floor and fits(cut):
                return cut, _skip_blank_lines(text, cut + 1)
    for cut in reversed(spaces):
        if fits(cut):
            return cut, len(text) - len(text[cut:].lstrip(" \t"))

    # One word longer than the chunk: cut it hard, outside any fence line.
    cut = start + room
    while cut > start + 1 and not fits(cut):
        cut -= 1
    if lines.inside_fence_line(cut):
        line_start = lines.starts[lines.line_of(cut)]
        if fits(line_start):
            cut = line_start
    return cut, cut


def split_markdown(text: str, limit: int) -> list[str]:
    """Chunks of at most `limit` characters, cut at a paragraph break near the end, else a line break,
    else a space; a chunk ending inside a code fence closes it and the next reopens it."""
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT} characters, got {limit}")
    text = text.rstrip().lstrip("\n")
    if not text:
        return []
    lines = _Lines(text)
    chunks: list[str] = []
    start = 0
    end_state: _Fence | None = None  # the fence the previous chunk closed, reopened by this one
    while start < len(text):
        head = _head(end_state, limit)
        room = limit - len(head)
        end_state = lines.after[-1]
        if (len(text) - start) + _closer_len(end_state) <= room:
            cut, next_start = len(text), len(text)
        else:
            cut, next_start = _choose_cut(lines, start, room)
            end_state = lines.state_at(cut)
        closer = "" if end_state is None else "\n" + end_state.marker
        if (body := text[start:cut]).strip():
            chunks.append(head + body + closer)
        start = next_start
    # Only a fence marker nearly half as long as `limit` can overflow: then the limit wins.
    return [chunk[i : i + limit] for chunk in chunks for i in range(0, len(chunk), limit)]


def truncate(text: str, limit: int, marker: str = "…", *, at_word: bool = False) -> tuple[str, bool]:
    """Cut `text` to `limit` characters ending with `marker` (`at_word`: between words), and if it cut."""
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    if len(text) <= limit:
        return text, False
    if limit <= len(marker):
        return marker[:limit], True
    kept = text[: limit - len(marker)]
    if at_word and not text[len(kept)].isspace():
        inside = _LAST_WORD.search(kept)
        if inside is not None and kept[: inside.start()].strip():
            kept = kept[: inside.start()]
    return kept.rstrip() + marker, True


_LAST_WORD = re.compile(r"\s\S*$")


QUOTE_CHARS = 200
_LONG_RUN = re.compile(rf"\S{{{QUOTE_CHARS + 1},}}")


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` cut to `limit` characters for an error message: it goes back to the model."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return text[:limit] + "…" + size


def shorten_runs(text: str, limit: int = QUOTE_CHARS) -> str:
    """Cut every run of more than `limit` non-space characters: a value quoted inside a message."""
    return _LONG_RUN.sub(lambda match: match.group(0)[:limit] + "…", text)


def shown_result(content: str) -> str:
    """A tool result as people see it: too-deep JSON starts with a note line, so no surface parses it."""
    try:
        loads(content)
    except TooDeep:
        return f"(JSON nested deeper than {MAX_DEPTH} levels, shown as plain text)\n{content}"
    except ValueError:
        pass
    return content


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "{…}" if value else "{}"
    if isinstance(value, list):
        return f"[{len(value)} item{'' if len(value) == 1 else 's'}]"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def summarize_result(content: str, limit: int = 120) -> str:
    """A one-line summary of a tool result: a JSON object's `k=v` fields, scalars first, or its first line."""
    summary = next((line.strip() for line in content.splitlines() if line.strip()), "")
    try:
        data = loads(content)
    except TooDeep:
        return truncate(f"JSON nested deeper than {MAX_DEPTH} levels ({len(content)} characters)", limit)[0]
    except ValueError:
        return truncate(summary, limit)[0]
    if isinstance(data, dict):
        scalars_first = sorted(data.items(), key=lambda item: isinstance(item[1], dict | list))
        summary = ", ".join(f"{k}={_short(v)}" for k, v in scalars_first) or "{}"

    elif isinstance(data, list):
        summary = _short(data) + (f": {_short(data[0])}" if data else "")
    else:
        summary = _short(data)
    return truncate(summary, limit)[0]


def pretty_json(content: str) -> str:
    """`content` indented for reading if it is JSON, else unchanged (so is JSON nested too deep)."""
    try:
        data = loads(content)
    except ValueError:
        return content
    return json.dumps(data, indent=2, ensure_ascii=False)


def neutralize_mentions(text: str) -> str:
    """Break `@everyone`, `@here` and `@channel` so a model's answer can never ping a whole room."""
    return _MASS_MENTION.sub(lambda m: "@" + _ZWSP + m.group(1), text)


# --- links written by the model or a tool ----------------------------------------------------------

# `[text](url)`, `[text](<url>)`, `[text](url "title")`: the forms shown as `text (url)` instead.
_INLINE_LINK = re.compile(
    r"\[([^\[\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
# Every other link and image needs `]` right before `(`, `[` or `:` (a reference, its definition).
_LINK_SYNTAX = re.compile(r"\](?=[(\[:])")
_BACKTICKS = re.compile(r"`+")


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks every CommonMark reader agrees on: an indented opener may belong to a list
    item, whose end closes the block early, so nothing after one is trusted as code."""
    lines = _Lines(text)
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for i in (i for i, toggled in enumerate(lines.is_fence) if toggled):
        if start is not None:
            blocks.append((start, lines.ends[i]))
            start = None
        elif text[lines.starts[i]] in "`~":
            start = lines.starts[i]
        else:
            return blocks  # an indented opener: nothing after it can be trusted to be code
    if start is not None:
        blocks.append((start, len(text)))
    return blocks


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Inline code spans: a backtick run closed by the next run of the same length."""
    runs = [m for m in _BACKTICKS.finditer(text) if not (m.start() and text[m.start() - 1] == "\\")]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        width = len(runs[i].group(0))
        closer = next((j for j in range(i + 1, len(runs)) if len(runs[j].group(0)) == width), None)
        if closer is not None:
            spans.append((runs[i].start(), runs[closer].end()))
        i = i + 1 if closer is None else closer + 1
    return spans


def outside(text: str, regions: list[tuple[int, int]], change: Callable[[str], str]) -> str:
    """`text` with `change` applied to every part outside `regions` (sorted, disjoint spans)."""
    parts, pos = [], 0
    for start, end in regions:
        parts += [change(text[pos:start]), text[start:end]]
        pos = end
    parts.append(change(text[pos:]))
    return "".join(parts)


def show_link_targets(text: str) -> str:
    """No link whose text hides where it goes: `[a.com](https://b.example)` becomes `a.com (https://b.example)`;
    every other link form (references, definitions, images) loses its `]` adjacency to a zero-width space,
    even in inline code, whose ends hostile text plays with; fenced blocks every reader agrees on stay."""

    def shown(match: re.Match[str]) -> str:
        label, url = match.group(1).strip(), match.group(2)
        if not label or label.rstrip("/") == url.rstrip("/"):
            return url
        return f"{label} ({url})"

    def plain(prose: str) -> str:
        rewritten = outside(prose, _code_spans(prose), lambda part: _INLINE_LINK.sub(shown, part))
        return _LINK_SYNTAX.sub("]" + _ZWSP, rewritten)

    return outside(text, _fenced_blocks(text), plain)

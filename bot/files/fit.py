"""What the model reads of a stored file: a header line, then its text whole when it fits the share of
the context it is given, or its head and tail with a note of the lines left out and the tools that
read them (`read_attachment`, `search_attachment`); and those tools' answers, as numbered lines.

Cutting to a budget keeps a 20 MB log from pushing the conversation out of the context window, while
the note tells the model exactly which lines it has not seen, so it can ask instead of guessing.
Estimates use `bot.model.tokens` without its cache (a big file's text would stay pinned in it) and on
samples of a big text, so fitting costs the same whatever the file's size.
"""

from __future__ import annotations

import base64
import re

from bot.files.read import display_name
from bot.model.tokens import estimate_tokens
from bot.types.files import StoredFile

# The tools the notes name: the core offers them under these names (`FileTools`).
READ_TOOL = "read_attachment"
SEARCH_TOOL = "search_attachment"
# Share of the text budget that goes to the head; the tail gets the rest.
_HEAD_SHARE = 0.7
# Characters estimated to learn a big text's tokens per character (from its start and its end).
_SAMPLE_CHARS = 100_000
# Every character costs at least this many tokens (letters and spaces, `estimate_tokens`).
_MIN_TOKENS_PER_CHAR = 1 / 4.2
# What the tools return at most, and how much of one line they show.
LINES_MAX_CHARS = 12_000
_SEARCH_LINE_CHARS = 300
# Matching lines a search counts before saying "10,000+".
_SEARCH_COUNT = 10_000
# Room kept in a tool's answer for the note of where it stopped.
_NOTE_ROOM = 100
_LINE_CUT = " … (line cut: output limit)"
# Lines of a file shown with its header in earlier turns.
_SHORT_LINES = 3
_SHORT_LINE_CHARS = 160

_count_tokens = estimate_tokens.__wrapped__


def size_text(size: int) -> str:
    """'820 bytes', '12 KB', '3.4 MB'."""
    if size < 1024:
        return f"{size} byte{'s' if size != 1 else ''}"
    if size < 1024 * 1024:
        return f"{max(1, round(size / 1024))} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def header(file: StoredFile) -> str:
    """`[file f_ab12: report.csv · text/csv · 12 KB · CSV: 5 columns (…), 1,204 rows]`."""
    parts = [display_name(file.name), file.mime, size_text(file.size)]
    if file.summary:
        parts.append(file.summary)
    return f"[file {file.id}: {' · '.join(parts)}]"


def data_url(file: StoredFile) -> str | None:
    """The scaled image as a data URL for an image part of a message (None for a text file)."""
    if file.image is None or not file.image_mime:
        return None
    return f"data:{file.image_mime};base64,{base64.b64encode(file.image).decode('ascii')}"


def fit(file: StoredFile, max_tokens: int, *, shown: bool = False) -> str:
    """The block the model reads for `file` within about `max_tokens`. For an image, the header only
    (`shown`: the image itself is attached to the message as an image part)."""
    top = header(file)
    if file.kind == "image":
        if shown:
            return f"{top}\n(the image is attached to this message)"
        return f"{top}\n(an image: the model does not see it in this request)"
    text = file.text
    if not text:
        return f"{top}\n(no text)"
    whole = f"{top}\n{text}"
    if len(whole) * _MIN_TOKENS_PER_CHAR <= max_tokens and _count_tokens(whole) <= max_tokens:
        return whole
    return _cut(file, top, max_tokens)


def _cut(file: StoredFile, top: str, max_tokens: int) -> str:
    text = file.text
    total = line_count(text)
    per_char = _tokens_per_char(text)
    budget = max_tokens - _count_tokens(top) - _count_tokens(_note(file, total, total, total)) - 8
    for _ in range(6):
        chars = max(0, int(budget / per_char))
        head_end = _line_start_before(text, int(chars * _HEAD_SHARE))
        tail_start = _line_start_after(text, len(text) - (chars - head_end), head_end)
        head = text[:head_end].rstrip("\n")
        if not head_end and chars:
            # Not even the first line fits whole: its beginning, marked as cut.
            head = text[: int(chars * _HEAD_SHARE)] + " … (line 1 goes on)"
        first_left = text.count("\n", 0, head_end) + 1
        last_left = text.count("\n", 0, tail_start) if tail_start < len(text) else total
        tail = text[tail_start:].rstrip("\n")
        note = _note(file, first_left, max(first_left, last_left), total)
        block = "\n".join(part for part in (top, head, note, tail) if part)
        if budget <= 0 or _count_tokens(block) <= max_tokens:
            return block
        budget = int(budget * 0.8)
    return f"{top}\n{_note(file, 1, total, total)}"


def _note(file: StoredFile, first: int, last: int, total: int) -> str:
    return (
        f"[lines {first:,}–{last:,} of {total:,} left out: call {READ_TOOL}("
        f'attachment_id="{file.id}", start_line={first}, end_line=…) to read them, '
        f'or {SEARCH_TOOL}(attachment_id="{file.id}", query=…) to find lines]'
    )


def _tokens_per_char(text: str) -> float:
    if len(text) <= 2 * _SAMPLE_CHARS:
        return max(_MIN_TOKENS_PER_CHAR, _count_tokens(text) / len(text))
    sample = text[:_SAMPLE_CHARS] + text[-_SAMPLE_CHARS:]
    return max(_MIN_TOKENS_PER_CHAR, _count_tokens(sample) / len(sample))


def _line_start_before(text: str, position: int) -> int:
    """The start of the line `position` falls in (so the head ends on whole lines); 0 if none fits."""
    if position >= len(text):
        return len(text)
    cut = text.rfind("\n", 0, position)
    return cut + 1 if cut >= 0 else 0


def _line_start_after(text: str, position: int, floor: int) -> int:
    """The start of the first whole line at or after `position`, never before `floor`."""
    position = max(position, floor)
    if position <= floor or position == 0 or text[position - 1] == "\n":
        return position
    cut = text.find("\n", position)
    return len(text) if cut < 0 else cut + 1


def line_count(text: str) -> int:
    """Lines of `text`, as `lines` numbers them (a last line without a newline counts)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _split(text: str) -> list[str]:
    parts = text.split("\n")
    return parts[:-1] if text.endswith("\n") else parts


def lines(file: StoredFile, start_line: int, end_line: int, *, max_chars: int = LINES_MAX_CHARS) -> str:
    """Lines `start_line`–`end_line` (from 1, inclusive) of the file, numbered, at most `max_chars`;
    says where it stopped so the next call can go on. Splits the text only up to `end_line`."""
    if file.kind == "image":
        return f"{header(file)}\nThis is an image: it has no lines of text."
    total = line_count(file.text)
    if total == 0:
        return f"{header(file)}\nThe file has no text."
    start = max(1, start_line)
    end = min(total, max(end_line, start))
    if start > total:
        return f"The file {file.id} has {total:,} lines; line {start:,} is past its end."
    wanted = file.text.split("\n", end)[start - 1 : end]
    out = [f"[file {file.id}: lines {start:,}–{end:,} of {total:,}]"]
    used = len(out[0])
    width = len(str(end))
    for number in range(start, end + 1):
        line = f"{number:>{width}}| {wanted[number - start]}"
        if used + len(line) + 1 > max_chars - _NOTE_ROOM:
            if number == start:
                room = max(0, max_chars - _NOTE_ROOM - used - len(_LINE_CUT) - 1)
                out.append(line[:room] + _LINE_CUT)
                number += 1
            if number <= end:
                out.append(
                    f"[stopped before line {number:,} (output limit): call again with start_line={number}]"
                )
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def search(file: StoredFile, query: str, limit: int = 20, *, max_chars: int = LINES_MAX_CHARS) -> str:
    """Lines of the file containing `query` (case-insensitive; failing that, all its words), numbered,
    the first `limit` of them, at most `max_chars`. The phrase is found in the whole lower-cased text
    at C speed, line by line only for the words (about 0.3 s for 20 MB: call it in a worker thread)."""
    if file.kind == "image":
        return f"{header(file)}\nThis is an image: it has no text to search."
    phrase = " ".join(query.split())
    wanted = phrase.lower()
    if not wanted:
        return "Give a word or phrase to search for."
    text, total = file.text, line_count(file.text)
    folded = text.lower()
    hits = _phrase(text, folded, wanted, phrase)
    words = wanted.split()
    if not hits and len(words) > 1:
        hits = _words(text, folded, words)
    if not hits:
        return f"No line of {file.id} ({total:,} lines) contains {phrase!r}."
    counted = f"{len(hits):,}{'+' if len(hits) == _SEARCH_COUNT else ''}"
    out = [f"[file {file.id}: {counted} matching line{'s' if len(hits) != 1 else ''} of {total:,}]"]
    used = len(out[0])
    shown = 0
    for number, line, at in hits[: max(1, limit)]:
        entry = f"{number}| {_around(line, at)}"
        if used + len(entry) + 1 > max_chars - _NOTE_ROOM:
            break
        out.append(entry)
        used += len(entry) + 1
        shown += 1
    if shown < len(hits):
        more = f"{len(hits) - shown:,}{'+' if len(hits) == _SEARCH_COUNT else ''}"
        out.append(f"[{more} more: narrow the query, or {READ_TOOL} around a line]")
    return "\n".join(out)


# A matching line: its number, its text, where the match starts in it.
_Hit = tuple[int, str, int]


def _phrase(text: str, folded: str, wanted: str, phrase: str) -> list[_Hit]:
    """Lines containing `phrase` (`wanted`: lower-cased), up to `_SEARCH_COUNT` of them."""
    pattern = re.compile(re.escape(phrase), re.IGNORECASE)

    def find(position: int) -> tuple[int, int]:
        if len(folded) == len(text):
            at = folded.find(wanted, position)
            return at, at + len(wanted)
        # Lower-casing lengthened a character (rare: "İ"), so positions in `folded` would drift:
        # search the original case-insensitively, slower but exact.
        found = pattern.search(text, position)
        return (found.start(), found.end()) if found else (-1, -1)

    hits: list[_Hit] = []
    number, counted, position = 1, 0, 0
    while len(hits) < _SEARCH_COUNT:
        at, after = find(position)
        if at < 0:
            break
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", after)
        end = len(text) if end < 0 else end
        number += text.count("\n", counted, start)
        counted = start
        hits.append((number, text[start:end], at - start))
        position = end + 1
    return hits


def _words(text: str, folded: str, words: list[str]) -> list[_Hit]:
    """Lines containing every one of `words`, in any order, up to `_SEARCH_COUNT` of them."""
    folded_lines = folded.split("\n")
    # The longest word first, in a bare comprehension: few lines survive it, and only those are
    # checked for the other words.
    longest = max(words, key=len)
    others = [word for word in words if word != longest]
    candidates = [index for index, line in enumerate(folded_lines) if longest in line]
    numbers = [index for index in candidates if all(word in folded_lines[index] for word in others)]
    if not numbers:
        return []
    every = text.split("\n")
    return [
        (index + 1, every[index], max(0, every[index].lower().find(words[0])))
        for index in numbers[:_SEARCH_COUNT]
    ]


def _around(line: str, at: int) -> str:
    """A long line cut to the part around its match."""
    if len(line) <= _SEARCH_LINE_CHARS:
        return line
    start = max(0, min(max(at, 0) - _SEARCH_LINE_CHARS // 3, len(line) - _SEARCH_LINE_CHARS))
    cut = line[start : start + _SEARCH_LINE_CHARS]
    return ("…" if start else "") + cut + ("…" if start + _SEARCH_LINE_CHARS < len(line) else "")


def short(file: StoredFile) -> str:
    """The compact form of a file for earlier turns: its header and first lines (the model can call
    `read_attachment` for the rest)."""
    top = header(file)
    if file.kind == "image":
        return top
    first = _split(file.text[: _SHORT_LINES * _SHORT_LINE_CHARS * 4])[:_SHORT_LINES]
    shown = [
        line if len(line) <= _SHORT_LINE_CHARS else line[: _SHORT_LINE_CHARS - 1] + "…" for line in first
    ]
    more = line_count(file.text) > len(shown)
    note = f'[more: {READ_TOOL}(attachment_id="{file.id}", start_line=…, end_line=…)]' if more else ""
    return "\n".join(part for part in (top, *shown, note) if part)

"""Text-like files (plain text, Markdown, CSV, JSON, YAML, source code, logs): decoded whatever their
encoding, with a line about their shape for the model (a CSV's columns and rows, a JSON's keys).

People share files saved by Excel on Windows (cp1252), by old editors (latin-1) and by PowerShell
(UTF-16): UTF-8 is tried first (most files, and exact), then charset-normalizer guesses. Bytes that
decode to mostly control characters are not text, whatever the name says.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from dataclasses import dataclass

from charset_normalizer import from_bytes

from bot.files.sniff import suffix

# The share of control characters past which decoded bytes are binary, not text.
_BINARY_SHARE = 0.01
# How much of a file the binary check and the CSV dialect sniffer look at.
_SAMPLE = 65_536
# Control characters text files do have: tabs, line and page breaks, and logs' colour escapes.
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\x1b")
# Share of a cp1252 reading's non-ASCII characters that must look like Western accented letters.
_WESTERN_SHARE = 0.8
# A JSON with a line longer than this is re-indented for reading by line.
_LONG_LINE = 2_000
# Column names listed in a summary; the rest are counted.
_COLUMNS_SHOWN = 8

_MIMES = {
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/jsonl",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class Decoded:
    text: str
    mime: str
    summary: str


class NotText(Exception):
    """The bytes are not text in any encoding nerve can tell."""


def read_text(name: str, mime: str | None, data: bytes) -> Decoded:
    """`data` as text, with its type and summary; raises `NotText` for binary data."""
    text, encoding = decode(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    kind = _mime(name, mime)
    if kind == "application/json":
        text, described = _json(text)
    else:
        described = _describe(kind, text)
    count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    described = described or f"{count:,} line{'s' if count != 1 else ''}"
    if encoding not in {"utf_8", "ascii"}:
        described += f", {encoding.replace('_', '-')}"
    return Decoded(text=text, mime=kind, summary=described)


def decode(data: bytes) -> tuple[str, str]:
    """The text of `data` and the encoding it was read with (Python's codec name)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        encoding = _utf16_without_bom(data) or "utf_8"
        text = data.decode(encoding)
    except UnicodeDecodeError:
        western = _western(data)
        if western is not None:
            text, encoding = western, "cp1252"
        else:
            best = from_bytes(data).best()
            if best is None:
                raise NotText() from None
            text, encoding = str(best), best.encoding
    text = text.removeprefix("\ufeff")
    sample = text[:_SAMPLE]
    controls = sum(1 for char in sample if char not in _TEXT_CONTROLS and unicodedata.category(char) == "Cc")
    if sample and controls / len(sample) > _BINARY_SHARE:
        raise NotText()
    return text, encoding


def _utf16_without_bom(data: bytes) -> str | None:
    """'utf_16_le' or 'utf_16_be' for UTF-16 written without a byte order mark (some Windows tools):
    mostly-Latin text then has a zero in every other byte, which UTF-8 would take as control
    characters and refuse as binary."""
    sample = data[:4096]
    half = len(sample) // 2
    if half < 2:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if odd >= 0.4 * half and even <= 0.05 * half:
        return "utf_16_le"
    if even >= 0.4 * half and odd <= 0.05 * half:
        return "utf_16_be"
    return None


def _western(data: bytes) -> str | None:
    """`data` read as cp1252 (Windows' Western code page, a superset of latin-1's letters) when that
    reading looks like French, German, Spanish…: accented letters beside ASCII letters ("café").

    charset-normalizer guesses a short Western file as a Baltic or Central European code page
    (reading "déjà" as "dťjŗ"); Cyrillic or Greek read as cp1252 gives runs of accented letters with
    no ASCII letter beside them, and Polish gives symbols (¿, ³), so those are left to it."""
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return None
    sample = text[:_SAMPLE]
    wide = [index for index, char in enumerate(sample) if ord(char) > 127]

    def beside_ascii_letter(index: int) -> bool:
        around = sample[max(0, index - 1) : index] + sample[index + 1 : index + 2]
        return any(char.isascii() and char.isalpha() for char in around)

    western = sum(1 for index in wide if "\u00c0" <= sample[index] <= "\u00ff" and beside_ascii_letter(index))
    return text if wide and western >= _WESTERN_SHARE * len(wide) else None


def _mime(name: str, mime: str | None) -> str:
    ext = suffix(name)
    if ext in _MIMES:
        return _MIMES[ext]
    given = (mime or "").split(";")[0].strip().lower()
    if given.startswith("text/") or given in {"application/json", "application/yaml", "application/xml"}:
        return given
    return "text/plain"


def _describe(kind: str, text: str) -> str:
    if kind in {"text/csv", "text/tab-separated-values"}:
        return csv_summary(text, "\t" if kind == "text/tab-separated-values" else None)
    if kind == "application/jsonl":
        records = sum(1 for line in text.split("\n") if line.strip())
        return f"JSON Lines: {records:,} record{'s' if records != 1 else ''}"
    return ""


def csv_summary(text: str, delimiter: str | None = None) -> str:
    """'CSV: 5 columns (a, b, c, d, e), 1,204 rows' — the header and the row count (rows after the
    header; a quoted value may span lines, so rows are not lines)."""
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:_SAMPLE], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        header = next(reader, [])
        rows = sum(1 for row in reader if row)
    except csv.Error:
        return ""
    if not header:
        return "CSV: empty"
    names = [column.strip()[:40] or "(blank)" for column in header[:_COLUMNS_SHOWN]]
    more = ", …" if len(header) > _COLUMNS_SHOWN else ""
    label = "TSV" if delimiter == "\t" else "CSV"
    columns = f"{len(header)} column{'s' if len(header) != 1 else ''} ({', '.join(names)}{more})"
    return f"{label}: {columns}, {rows:,} row{'s' if rows != 1 else ''}"


def _json(text: str) -> tuple[str, str]:
    """The JSON's text (indented when it came on long lines: `read_attachment` pages by line, and a
    minified megabyte is one line) and its summary."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text, "JSON that does not parse"
    if any(len(line) > _LONG_LINE for line in text.split("\n")):
        text = json.dumps(value, indent=1, ensure_ascii=False)
    return text, json_summary(value)


def json_summary(value: object) -> str:
    """'JSON object: 3 keys (name, items, total)' or 'JSON array: 120 items'."""
    if isinstance(value, dict):
        keys = [str(key)[:40] for key in list(value)[:_COLUMNS_SHOWN]]
        more = ", …" if len(value) > _COLUMNS_SHOWN else ""
        plural = "s" if len(value) != 1 else ""
        return f"JSON object: {len(value):,} key{plural} ({', '.join(keys)}{more})"
    if isinstance(value, list):
        return f"JSON array: {len(value):,} item{'s' if len(value) != 1 else ''}"
    return "JSON: a single value"

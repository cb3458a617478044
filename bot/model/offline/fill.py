"""Reading tool arguments out of a question, by the tool's JSON Schema.

A value is only ever taken from something the person wrote (or, a round later, a tool's result), and
each piece of the question fills at most one argument; a default only for an optional argument.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.model.offline.answer import is_number
from bot.model.offline.words import STOP, WORD

NUM = r"[-+]?\d+(?:\.\d+)?"
# ASCII-only edges, so "31.23, 121.47附近" still reads as coordinates next to CJK text.
EDGE_L, EDGE_R = r"(?<![A-Za-z0-9_.])", r"(?![A-Za-z0-9_]|\.\d)"
_COORDS = re.compile(rf"{EDGE_L}({NUM})\s*°?\s*([NS])?\s*[,;/，]\s*({NUM})\s*°?\s*([EW])?{EDGE_R}", re.I)
_UNIT = re.compile(rf"{EDGE_L}({NUM})\s*(km|kilomet(?:er|re)s?|m|met(?:er|re)s?)(?![A-Za-z])", re.I)
_TOKENS = (re.compile(r"[\w.:/@+-]+"), re.compile(r"[A-Za-z0-9.:/@+-]+"))
# Straight double quotes, curly quotes, and single quotes that are not apostrophes ("what's").
_QUOTED = re.compile(r"\"([^\"\n]+)\"|“([^”\n]+)”|(?<!\w)'([^'\n]+)'(?!\w)")
_KEY_AFTER = re.compile(r"\s*:")
_PATH = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)*/?")
_EXTENSION = re.compile(r"[^/.]\.[A-Za-z][A-Za-z0-9]{0,7}$")
_PATH_NOUNS = {"file": "file", "files": "file", "folder": "directory", "folders": "directory"}
_PATH_NOUNS |= {"directory": "directory", "directories": "directory", "dir": "directory", "path": "path"}
_ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "a.m", "p.m"}
_LINKS = {"a", "an", "the", "my", "this", "that", "called", "named"}
_FORMATS = {
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),
    "uri": re.compile(r"https?://\S+"),
}
LAT_NAMES = ("lat", "latitude")
LNG_NAMES = ("lng", "lon", "long", "longitude")
_PATHISH_NAMES = ("path", "file", "filename", "dir", "directory", "folder", "source", "destination")
_MISSING = object()

Source = Literal["text", "result", "default"]


@dataclass(frozen=True, slots=True)
class PathMention:
    """A file or folder name in the question, and the noun that introduced it ("the file x")."""

    value: str
    noun: str | None


@dataclass(frozen=True, slots=True)
class Question:
    """The pieces of a question that can become argument values, read once per question."""

    text: str
    fields: dict[str, Any]
    quoted: tuple[str, ...]
    tokens: tuple[str, ...]
    paths: tuple[PathMention, ...]
    words: frozenset[str]


@dataclass(slots=True)
class Filled:
    """A tool's arguments as far as they could be read, where each came from, and what is missing."""

    args: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def used(self) -> frozenset[str]:
        """The values taken from the question or from results, as the pieces a tool covers."""
        return frozenset(_key(self.args[n]) for n, s in self.sources.items() if s != "default")


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).strip('"').casefold()


def norm(name: str) -> str:
    """A property or JSON key name compared without case, underscores or dashes."""
    return "".join(WORD.findall(name)).casefold()


def _json_object(text: str) -> tuple[dict[str, Any], tuple[int, int]] | None:
    """The first JSON object written in the text, and where it sits."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        except RecursionError:
            # Nested deeper than any question's arguments are: read the question as plain text.
            return None
        if isinstance(value, dict):
            return value, (match.start(), end)
    return None


def _paths(text: str) -> tuple[PathMention, ...]:
    """File and folder names: anything with a slash or an extension, or a name after "file"/"folder"."""
    found: list[PathMention] = []
    noun: str | None = None
    for match in _PATH.finditer(text):
        raw = match.group(0)
        value = raw.rstrip(".") if raw.strip(".") else raw  # a sentence's full stop, but "." itself
        lowered = value.casefold()
        if lowered in _PATH_NOUNS:
            noun = _PATH_NOUNS[lowered]
            continue
        if lowered in ("in", "inside", "under"):
            noun = "directory"  # "files in docs", "search in src"
            continue
        if noun is not None and lowered in _LINKS:
            continue  # "the file called x"
        looks_like_path = ("/" in value and any(c.isalpha() for c in value)) or _EXTENSION.search(value)
        named = noun is not None and lowered not in STOP
        if (looks_like_path or named) and lowered not in _ABBREVIATIONS and "://" not in value:
            found.append(PathMention(value, noun))
        noun = None
    return tuple(found)


def read_question(text: str) -> Question:
    """Split a question into the values it offers, keeping JSON keys out of them."""
    parsed = _json_object(text)
    fields, span = parsed if parsed is not None else ({}, (0, 0))
    keys: set[str] = set()
    quoted: list[str] = []
    for match in _QUOTED.finditer(text):
        value = next(g for g in match.groups() if g is not None)
        if _KEY_AFTER.match(text, match.end()):
            keys.add(value)  # `"city":` names a field; it is not a value
        elif not span[0] <= match.start() < span[1]:
            quoted.append(value)  # values inside the object belong to their keys
    tokens = [t.strip(".:/-") for regex in _TOKENS for t in regex.findall(text)]
    return Question(
        text=text,
        fields={norm(k): v for k, v in fields.items()},
        quoted=tuple(quoted),
        tokens=tuple(t for t in tokens if t and t not in keys),
        paths=tuple(p for p in _paths(text) if p.value not in keys),
        words=frozenset(w.casefold() for w in WORD.findall(text)),
    )


# --- numbers ----------------------------------------------------------------------------------------


def _number(literal: str) -> int | float:
    return float(literal) if "." in literal else int(literal)


def coordinates(text: str) -> tuple[int | float, int | float] | None:
    """The first `lat, lng` pair; one of them must have decimals, so "3, 4 apples" is no place."""
    for m in _COORDS.finditer(text):
        if "." in m.group(1) + m.group(3):
            lat, lng = _number(m.group(1)), _number(m.group(3))
            lat = -lat if (m.group(2) or "").upper() == "S" else lat
            lng = -lng if (m.group(4) or "").upper() == "W" else lng
            return lat, lng
    return None


def named_number(name: str, text: str) -> int | float | None:
    """A number written next to the argument's name ("limit 5", "5 days", "lat: 31.2")."""
    lowered = name.lower()
    names = LAT_NAMES if lowered in LAT_NAMES else LNG_NAMES if lowered in LNG_NAMES else (name,)
    for n in names:
        spelled = re.escape(n).replace("_", r"[\s_]+")
        after = re.search(rf"\b{spelled}\b\s*(?:of|is|=|:)?\s*({NUM}){EDGE_R}", text, re.I)
        found = after or re.search(rf"{EDGE_L}({NUM})\s*(?:[a-z]+\s+)?{spelled}\b", text, re.I)
        if found:
            return _number(found.group(1))
    return None


def _from_text_number(name: str, prop: dict[str, Any], text: str) -> Any:
    value: int | float | None = named_number(name, text)
    coords = coordinates(text)
    lowered = name.lower()
    if value is None and coords is not None:
        if lowered in LAT_NAMES or lowered.endswith("_lat"):
            value = coords[0]
        elif lowered in LNG_NAMES or lowered.endswith(("_lng", "_lon")):
            value = coords[1]
    about = f"{name} {prop.get('description', '')}".lower()
    if value is None and any(w in about for w in ("radius", "distance", "meter", "metre")):
        unit = _UNIT.search(text)
        if unit:
            value = _number(unit.group(1)) * (1000 if unit.group(2).lower().startswith("k") else 1)
    if value is None:
        return _MISSING
    if prop.get("type") == "integer":
        return int(value) if float(value).is_integer() else _MISSING
    return value


# --- strings ----------------------------------------------------------------------------------------


def _pattern_match(pattern: str, candidates: list[str]) -> str | None:
    try:
        return next((c for c in candidates if c and re.search(pattern, c)), None)
    except re.error:
        return None


def _is_pathish(name: str) -> bool:
    lowered = name.lower()
    return any(lowered == p or lowered.endswith(("_" + p, p)) for p in _PATHISH_NAMES)


def _from_text_string(
    name: str, prop: dict[str, Any], q: Question, tool_words: set[str], used: set[str]
) -> Any:
    pattern = prop.get("pattern")
    if isinstance(pattern, str):
        candidates = [c for t in q.tokens for c in (t, t.upper()) if _key(c) not in used]
        found = _pattern_match(pattern, candidates)
        return _MISSING if found is None else found
    fmt = _FORMATS.get(str(prop.get("format", "")))
    if fmt is not None:
        match = next((m.group(0) for m in fmt.finditer(q.text) if _key(m.group(0)) not in used), None)
        return _MISSING if match is None else match
    if _is_pathish(name):
        # "the directory docs" goes to a tool about directories, "the file notes.txt" to one about
        # files; a bare "notes.txt" to either, before a name said to be something else.
        free = [p for p in q.paths if _key(p.value) not in used]
        kinds = {_PATH_NOUNS[w] for w in tool_words if w in _PATH_NOUNS} - {"path"}
        fits = [p for p in free if not kinds or p.noun in kinds or p.noun == "path"]
        bare = [p for p in free if p.noun is None]
        if fits or bare or free:
            return (fits or bare or free)[0].value
    return next((v for v in q.quoted if _key(v) not in used), _MISSING)


# --- filling ----------------------------------------------------------------------------------------


def _fits(kind: Any, value: Any) -> bool:
    if kind in ("number", "integer"):
        return is_number(value) and (kind == "number" or float(value).is_integer())
    checks: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "boolean": bool,
        "array": list,
        "object": dict,
    }
    expected = checks.get(str(kind))
    return True if expected is None else isinstance(value, expected)


def _from_fields(name: str, prop: dict[str, Any], kind: Any, fields: dict[str, Any]) -> Any:
    """The value a JSON object in the question gives under this argument's name."""
    wanted = norm(name)
    close = [
        k for k in fields if min(len(k), len(wanted)) >= 3 and (k.startswith(wanted) or wanted.startswith(k))
    ]
    key = wanted if wanted and wanted in fields else next(iter(close), None)
    if key is None:
        return _MISSING
    value = fields[key]
    if isinstance(value, str) and kind in ("number", "integer"):
        try:
            value = _number(value.strip())
        except ValueError:
            return _MISSING
    if not _fits(kind, value) or ("enum" in prop and value not in prop["enum"]):
        return _MISSING
    return int(value) if kind == "integer" else value


def _from_results(prop: dict[str, Any], name: str, kind: Any, known: dict[str, Any]) -> Any:
    if name in known and _fits(kind, known[name]):
        return known[name]
    pattern = prop.get("pattern")
    if kind == "string" and isinstance(pattern, str):
        found = _pattern_match(pattern, [v for v in known.values() if isinstance(v, str)])
        return _MISSING if found is None else found
    return _MISSING


def _from_text(
    name: str, prop: dict[str, Any], kind: Any, q: Question, tool_words: set[str], used: set[str]
) -> Any:
    value = _from_fields(name, prop, kind, q.fields)
    if value is not _MISSING:
        return value
    if "enum" in prop:
        return next((v for v in prop["enum"] if str(v).casefold() in q.words), _MISSING)
    if kind in ("number", "integer"):
        return _from_text_number(name, {**prop, "type": kind}, q.text)
    if kind == "string":
        return _from_text_string(name, prop, q, tool_words, used)
    return _MISSING


def fill(
    schema: dict[str, Any], q: Question, tool_words: set[str], known: dict[str, Any] | None = None
) -> Filled:
    """Arguments read from the question (then from earlier results), and the required ones missing.

    `tool_words`, the tool's name, decide which of several file names mentioned goes to which tool."""
    out = Filled()
    used: set[str] = set()
    properties = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        value, source = _from_text(name, prop, kind, q, tool_words, used), "text"
        if value is _MISSING and known and name in required:
            value, source = _from_results(prop, name, kind, known), "result"
        if value is _MISSING and name not in required and "default" in prop:
            value, source = prop["default"], "default"
        if value is not _MISSING:
            out.args[name] = value
            out.sources[name] = source  # type: ignore[assignment]
            if source != "default":
                used.add(_key(value))
    out.missing = [r for r in required if r not in out.args]
    return out

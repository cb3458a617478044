"""Reading a question's words, and a tool's arguments out of it by the tool's JSON Schema.

A value is only ever taken from something the person wrote (or, a round later, a tool's result),
each piece of it for one argument at most; a default only for an optional argument.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from bot.types import ToolSpec

WORD = re.compile(r"[^\W_]+")
"""A word in any script, without underscores: what every part of the offline model splits text on."""

# Words that say nothing about what a tool is for; a question sharing only these with a tool's
# description is no reason to call it.
# fmt: off
STOP = {
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about",
    "into", "over", "is", "are", "be", "was", "were", "it", "its", "this", "that", "these", "those",
    "what", "which", "who", "how", "when", "where", "why", "do", "does", "did", "can", "could", "would",
    "should", "will", "shall", "may", "me", "my", "i", "you", "your", "we", "our", "us", "please",
    "tell", "show", "give", "get", "gets", "use", "used", "using", "uses", "user", "users", "ask",
    "asks", "tool", "tools", "return", "returns", "data", "info", "information", "given", "specified",
    "current", "like", "any", "some", "there", "here", "if", "not", "no", "yes", "now", "today",
    "right", "just", "also", "only", "than", "then", "as", "so", "but", "one", "all", "each", "via",
    "etc", "status", "result", "results", "value", "values", "based", "target", "whether", "json",
    "object", "short", "long", "question", "example", "default", "such", "first", "pick", "either",
}
# fmt: on

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
# The words that say what the next name is: "the file x", "files in docs", "search in src".
# fmt: off
_PATH_NOUNS = {
    "file": "file", "files": "file", "folder": "directory", "folders": "directory", "dir": "directory",
    "directory": "directory", "directories": "directory", "path": "path", "in": "directory",
    "inside": "directory", "under": "directory",
}
# fmt: on
_ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "a.m", "p.m"}
_LINKS = {"a", "an", "the", "my", "this", "that", "called", "named"}
_FORMATS = {
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),
    "uri": re.compile(r"https?://\S+"),
}
_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "boolean": bool, "array": list, "object": dict}
LAT_NAMES = ("lat", "latitude")
LNG_NAMES = ("lng", "lon", "long", "longitude")
_PATHISH_NAMES = ("path", "file", "filename", "dir", "directory", "folder", "source", "destination")


# --- words ------------------------------------------------------------------------------------------


def stem(word: str) -> str:
    """A crude stem, enough to match "running" with "run" and "files" with "file"."""
    for suffix in ("ing", "al", "es", "s", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]  # running → runn → run
    return word


def related(a: str, b: str) -> bool:
    """Two stems that name the same thing ("environ" and "environment")."""
    short, long = sorted((a, b), key=len)
    return a == b or (len(short) >= 4 and long.startswith(short))


def content_words(text: str) -> list[str]:
    """The stems of the words that carry meaning: no stop words, no numbers, no single letters."""
    words = [w.lower() for w in WORD.findall(text)]
    return [stem(w) for w in words if w not in STOP and not any(c.isdigit() for c in w) and len(w) > 1]


def is_number(value: Any) -> bool:
    """A JSON number; `True` is an int in Python but not a number to a schema or a reader."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def name_words(tool: ToolSpec) -> list[str]:
    """`writeFile` and `write_file` alike → ["write", "file"]."""
    return [w.lower() for w in WORD.findall(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tool.name))]


def norm(name: str) -> str:
    """A property or JSON key name compared without case, underscores or dashes."""
    return "".join(WORD.findall(name)).casefold()


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).strip('"').casefold()


# --- the question's values --------------------------------------------------------------------------


class PathMention(NamedTuple):
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


def _json_object(text: str) -> tuple[dict[str, Any], int, int]:
    """The first JSON object in the text and where it sits; one nested too deep is read as text."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        except RecursionError:
            break
        if isinstance(value, dict):
            return value, match.start(), end
    return {}, 0, 0


def _paths(text: str) -> list[PathMention]:
    """File and folder names: anything with a slash or an extension, or a name after "file"/"folder"."""
    found: list[PathMention] = []
    noun: str | None = None
    for raw in _PATH.findall(text):
        value = raw.rstrip(".") or raw  # a sentence's full stop, but "." itself
        lowered = value.casefold()
        if lowered in _PATH_NOUNS:
            noun = _PATH_NOUNS[lowered]
            continue
        if noun is not None and lowered in _LINKS:
            continue  # "the file called x"
        looks_like_path = ("/" in value and any(c.isalpha() for c in value)) or _EXTENSION.search(value)
        named = noun is not None and lowered not in STOP
        if (looks_like_path or named) and lowered not in _ABBREVIATIONS and "://" not in value:
            found.append(PathMention(value, noun))
        noun = None
    return found


def read_question(text: str) -> Question:
    """Split a question into the values it offers, keeping JSON keys out of them."""
    fields, start, end = _json_object(text)
    keys: set[str] = set()
    quoted: list[str] = []
    for match in _QUOTED.finditer(text):
        value = next(g for g in match.groups() if g is not None)
        if _KEY_AFTER.match(text, match.end()):
            keys.add(value)  # `"city":` names a field; it is not a value
        elif not start <= match.start() < end:
            quoted.append(value)  # values inside the object belong to their keys
    tokens = [t.strip(".:/-") for regex in _TOKENS for t in regex.findall(text)]
    return Question(
        text=text,
        fields={norm(k): v for k, v in fields.items()},
        quoted=tuple(quoted),
        tokens=tuple(t for t in tokens if t and t not in keys),
        paths=tuple(p for p in _paths(text) if p.value not in keys),
    )


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


# --- arguments --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Filled:
    """A tool's arguments as far as they could be read, and the required ones missing; `used`: the
    values taken from the question or results, the pieces of it a tool covers."""

    args: dict[str, Any]
    used: frozenset[str]
    missing: list[str]
    from_results: bool


def _number_from_text(name: str, prop: dict[str, Any], text: str) -> int | float | None:
    value = named_number(name, text)
    coords = coordinates(text)
    if value is None and coords is not None:
        last = name.lower().split("_")[-1]  # "lat", "start_lat"
        value = coords[0] if last in LAT_NAMES else coords[1] if last in LNG_NAMES else None
    about = f"{name} {prop.get('description', '')}".lower()
    unit = _UNIT.search(text)
    if value is None and unit and any(w in about for w in ("radius", "distance", "meter", "metre")):
        value = _number(unit.group(1)) * (1000 if unit.group(2).lower().startswith("k") else 1)
    if value is not None and prop.get("type") == "integer":
        return int(value) if float(value).is_integer() else None
    return value


def _pattern_match(pattern: str, candidates: list[str]) -> str | None:
    try:
        return next((c for c in candidates if c and re.search(pattern, c)), None)
    except re.error:
        return None


def _string_from_text(
    name: str, prop: dict[str, Any], q: Question, tool_words: set[str], used: set[str]
) -> str | None:
    pattern, fmt = prop.get("pattern"), _FORMATS.get(str(prop.get("format", "")))
    if isinstance(pattern, str):
        return _pattern_match(pattern, [c for t in q.tokens for c in (t, t.upper()) if _key(c) not in used])
    if fmt is not None:
        return next((m.group(0) for m in fmt.finditer(q.text) if _key(m.group(0)) not in used), None)
    if name.lower().endswith(_PATHISH_NAMES):
        # "the directory docs" goes to a tool about directories, "the file notes.txt" to one about
        # files; a bare "notes.txt" to either, before a name said to be something else.
        free = [p for p in q.paths if _key(p.value) not in used]
        kinds = {_PATH_NOUNS[w] for w in tool_words if w in _PATH_NOUNS} - {"path"}
        fits = [p for p in free if not kinds or p.noun in kinds or p.noun == "path"]
        bare = [p for p in free if p.noun is None]
        if found := fits or bare or free:
            return found[0].value
    return next((v for v in q.quoted if _key(v) not in used), None)


def _fits(kind: Any, value: Any) -> bool:
    if kind in ("number", "integer"):
        return is_number(value) and (kind == "number" or float(value).is_integer())
    return isinstance(value, _TYPES.get(str(kind), object))


def _from_fields(name: str, prop: dict[str, Any], kind: Any, fields: dict[str, Any]) -> Any:
    """A JSON object's value under this argument's name, or a key it starts or that starts it ("lat")."""
    wanted = norm(name)
    close = [
        k for k in fields if min(len(k), len(wanted)) >= 3 and (k.startswith(wanted) or wanted.startswith(k))
    ]
    key = wanted if wanted and wanted in fields else next(iter(close), None)
    value = None if key is None else fields[key]
    if isinstance(value, str) and kind in ("number", "integer"):
        try:
            value = _number(value.strip())
        except ValueError:
            return None
    if value is None or not _fits(kind, value) or ("enum" in prop and value not in prop["enum"]):
        return None
    return int(value) if kind == "integer" else value


def _from_text(
    name: str, prop: dict[str, Any], kind: Any, q: Question, tool_words: set[str], used: set[str]
) -> Any:
    value = _from_fields(name, prop, kind, q.fields)
    if value is not None:
        return value
    if "enum" in prop:
        said = {w.casefold() for w in WORD.findall(q.text)}
        return next((v for v in prop["enum"] if str(v).casefold() in said), None)
    if kind in ("number", "integer"):
        return _number_from_text(name, {**prop, "type": kind}, q.text)
    return _string_from_text(name, prop, q, tool_words, used) if kind == "string" else None


def _from_results(prop: dict[str, Any], name: str, kind: Any, known: dict[str, Any]) -> Any:
    if name in known and _fits(kind, known[name]):
        return known[name]
    pattern = prop.get("pattern")
    if kind == "string" and isinstance(pattern, str):
        return _pattern_match(pattern, [v for v in known.values() if isinstance(v, str)])
    return None


def fill(tool: ToolSpec, q: Question, known: dict[str, Any] | None = None) -> Filled:
    """Arguments read from the question (then from earlier results), a default only for an optional
    one; the tool's name decides which of several file names mentioned goes to which tool."""
    tool_words = set(name_words(tool))
    args: dict[str, Any] = {}
    used: set[str] = set()
    from_results = False
    required = [r for r in tool.parameters.get("required") or [] if isinstance(r, str)]
    for name, prop in (tool.parameters.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        value = _from_text(name, prop, kind, q, tool_words, used)
        if value is None and known and name in required:
            value = _from_results(prop, name, kind, known)
            from_results = from_results or value is not None
        if value is not None:
            used.add(_key(value))
        elif name not in required and prop.get("default") is not None:
            value = prop["default"]
        if value is not None:
            args[name] = value
    return Filled(args, frozenset(used), [r for r in required if r not in args], from_results)

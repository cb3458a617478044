"""The offline model: what answers when no model service is configured.

It lets `make run` do something real on a fresh clone (call the configured MCP servers and report
what they said) without an API key, a network or a download. It understands no language: it matches
words and reads JSON Schemas, and it says so in its replies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.render import truncate
from bot.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, Usage

_WORD = re.compile(r"[^\W_]+")
_NUM = r"[-+]?\d+(?:\.\d+)?"
# ASCII-only edges, so "31.23, 121.47附近" still reads as coordinates next to CJK text.
_EDGE_L, _EDGE_R = r"(?<![A-Za-z0-9_.])", r"(?![A-Za-z0-9_]|\.\d)"
_COORDS = re.compile(rf"{_EDGE_L}({_NUM})\s*°?\s*([NS])?\s*[,;/，]\s*({_NUM})\s*°?\s*([EW])?{_EDGE_R}", re.I)
_UNIT = re.compile(rf"{_EDGE_L}({_NUM})\s*(km|kilomet(?:er|re)s?|m|met(?:er|re)s?)(?![A-Za-z])", re.I)
_TOKENS = (re.compile(r"[\w.:/@+-]+"), re.compile(r"[A-Za-z0-9.:/@+-]+"))
_QUOTED = re.compile(r"[\"“']([^\"”']+)[\"”']")
_FORMATS = {
    "date": re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),
    "uri": re.compile(r"https?://\S+"),
}
_LAT_NAMES = ("lat", "latitude")
_LNG_NAMES = ("lng", "lon", "long", "longitude")
_OUTDOOR = re.compile(
    r"\b(run|running|jog|jogging|walk|walking|stroll|hike|hiking|bike|biking|cycle|cycling|picnic|"
    r"outdoors?|outside|exercise)\b|跑步|散步|户外|戶外"
)
_ACTIVITY = {"run": "a run", "jog": "a run", "walk": "a walk", "stroll": "a walk", "hike": "a hike"}
_ACTIVITY |= {"bik": "a bike ride", "cycl": "a bike ride", "picnic": "a picnic", "跑步": "a run"}
_GREEN = ("park", "garden", "trail", "track", "green", "forest", "lake", "river", "公园", "公園")
_GREETINGS = {"hi", "hello", "hey", "hiya", "yo", "morning", "evening", "afternoon", "thanks", "thank"}
_GREETINGS |= {"你好", "您好", "嗨", "谢谢"}
_SMALL_TALK = _GREETINGS | {"there", "good", "you", "all", "everyone", "bot", "nerve", "so", "much", "ok"}
# Words that say nothing about what a tool is for; a question sharing only these with a tool's
# description is no reason to call it.
# fmt: off
_STOP = {
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
# The host's certainty line before a result (`Tool "x" ran successfully. Its raw result follows:`).
_ANCHOR = re.compile(r"^\s*tool\b.*:\s*$", re.I)
_FAILED_PREFIX = re.compile(r"^\s*tool\s+[\"'`]?[\w.-]+[\"'`]?\s+(?:failed|errored|error)\s*[:.,-]?\s*", re.I)
_NEGATIVE = re.compile(r"^(do not|don't|never|not for|avoid)\b", re.I)
_VERBS = {"get", "fetch", "query", "lookup", "look", "search", "find", "list", "simulate", "read", "check"}
_NOISE = {"id", "ok", "success", "meta", "metadata", "source", "version", "request_id", "timestamp"}
_GENERIC_CHILD = {"speed", "direction", "value", "level", "type", "min", "max", "high", "low", "average"}
_LABEL_KEYS = ("category", "level", "quality", "air_quality", "aqi_level", "aqi_category", "description")
# Key suffix → unit, checked in order (so `_ugm3` wins over `_m`).
# fmt: off
_UNITS = (
    ("_ugm3", " µg/m³"), ("_pct", "%"), ("_percent", "%"), ("_kmh", " km/h"), ("_km", " km"),
    ("_meters", " m"), ("_metres", " m"), ("_m", " m"), ("_c", " °C"), ("_f", " °F"), ("_hpa", " hPa"),
)
# fmt: on
_MISSING = object()


class OfflineModel:
    """A deterministic, rule-based stand-in for a chat model, so nerve works without an API key.

    On a question it calls every tool whose name, description or triggers share a word with it and
    whose required arguments it can read from the text (schema patterns, coordinates, numbers next
    to the argument's name, enum words, defaults) — or, one round later, from the results of the
    tools it already called. Then it writes a short markdown summary of the results. It never
    invents an answer. For a real model set OPENAI_API_KEY (OpenAI), or OPENAI_BASE_URL plus
    NERVE_MODEL (any OpenAI-compatible server).
    """

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """Answer the latest real question: with tool calls, or from the results that followed it."""
        at = _question_index(messages)
        question = (messages[at].content or "") if at is not None else ""
        since = list(messages[at + 1 :]) if at is not None else list(messages)
        first_id = 1 + sum(len(m.tool_calls) for m in messages)
        if any(m.role == "tool" for m in since):
            outcomes = _outcomes(since, tools)
            message = _follow_up(question, since, outcomes, tools, first_id) or ChatMessage(
                role="assistant", content=_answer(question, outcomes)
            )
        else:
            message = _decide(question, tools, first_id)
        prompt = estimate_message_tokens(messages) + estimate_tools_tokens(tools)
        completion = estimate_message_tokens([message])
        return Completion(message=message, usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


def _is_nudge(message: ChatMessage) -> bool:
    """The host's "are you sure no tool is needed?" message, which is not a new question."""
    text = (message.content or "").lower()
    asks = "tool" in text and "need" in text and any(w in text for w in ("sure", "confirm", "certain"))
    return asks or ("确定" in text and "工具" in text)


def _question_index(messages: Sequence[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and not _is_nudge(messages[i]):
            return i
    return None


# --- deciding which tools to call -------------------------------------------------------------------


def _stem(word: str) -> str:
    for suffix in ("ing", "al", "es", "s", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]  # running → runn → run
    return word


def _related(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return a == b or (len(short) >= 4 and long.startswith(short))


def _content_words(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text)]
    return [_stem(w) for w in words if w not in _STOP and not any(c.isdigit() for c in w) and len(w) > 1]


def _description_words(tool: ToolSpec) -> list[str]:
    # "Do not use for forecasts" and other tools' names are reasons *not* to pick this tool.
    sentences = re.split(r"(?<=[.!?;])\s+", tool.description)
    kept = " ".join(s for s in sentences if not _NEGATIVE.match(s))
    return _content_words(tool.name) + _content_words(re.sub(r"\w+_\w+", " ", kept))


def _said(trigger: str, lowered: str) -> bool:
    if trigger.isascii():
        return re.search(rf"(?<!\w){re.escape(trigger)}(?!\w)", lowered) is not None
    return trigger in lowered  # CJK has no spaces between words


def _takes_these_coordinates(tool: ToolSpec, question: str) -> bool:
    """Coordinates in the question are reason enough to call a tool that takes a latitude."""
    names = [str(n).lower() for n in tool.parameters.get("properties") or {}]
    lat = next((n for n in names if n in _LAT_NAMES), None)
    if lat is None or not any(n in _LNG_NAMES for n in names):
        return False
    return _coordinates(question) is not None or _named_number(lat, question) is not None


def _matches(tool: ToolSpec, question: str) -> bool:
    lowered = question.lower()
    if any(_said(t.lower().strip(), lowered) for t in tool.triggers if t.strip()):
        return True
    if _takes_these_coordinates(tool, question):
        return True
    tool_words = _description_words(tool)
    return any(_related(w, t) for w in _content_words(question) for t in tool_words)


def _calls(chosen: list[tuple[ToolSpec, dict[str, Any]]], first_id: int) -> ChatMessage:
    calls = tuple(
        ToolCall(
            id=f"call_offline_{first_id + i}", name=tool.name, arguments=json.dumps(args, ensure_ascii=False)
        )
        for i, (tool, args) in enumerate(chosen)
    )
    return ChatMessage(role="assistant", tool_calls=calls)


def _decide(question: str, tools: Sequence[ToolSpec], first_id: int) -> ChatMessage:
    words = [w.lower() for w in _WORD.findall(question)]
    if words and all(w in _SMALL_TALK for w in words) and any(w in _GREETINGS for w in words):
        return ChatMessage(role="assistant", content=_greeting(words, tools))
    chosen: list[tuple[ToolSpec, dict[str, Any]]] = []
    missing: list[tuple[ToolSpec, list[str]]] = []
    for tool in (t for t in tools if _matches(t, question)):
        args, unfilled = _fill(tool.parameters, question)
        if unfilled:
            missing.append((tool, unfilled))
        else:
            chosen.append((tool, args))
    if chosen:
        return _calls(chosen, first_id)
    return ChatMessage(role="assistant", content=_help(tools, missing))


def _follow_up(
    question: str,
    since: Sequence[ChatMessage],
    outcomes: list[_Outcome],
    tools: Sequence[ToolSpec],
    first_id: int,
) -> ChatMessage | None:
    """Calls that the first results made possible ("near 31.2, 121.4" → an area code → the air there)."""
    called = {c.name for m in since for c in m.tool_calls}
    known: dict[str, Any] = {}
    for outcome in outcomes:
        if not outcome.failed:
            _collect(outcome.data, known)
    chosen: list[tuple[ToolSpec, dict[str, Any]]] = []
    for tool in tools:
        if tool.name not in called and _matches(tool, question):
            args, unfilled = _fill(tool.parameters, question, known)
            if not unfilled:
                chosen.append((tool, args))
    return _calls(chosen, first_id) if chosen else None


def _collect(data: Any, known: dict[str, Any]) -> None:
    """Every scalar in a JSON result by key, first one wins."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        if isinstance(value, dict | list):
            _collect(value, known)
        elif isinstance(key, str):
            known.setdefault(key, value)


# --- filling arguments from the schema --------------------------------------------------------------


def _number(literal: str) -> int | float:
    return float(literal) if "." in literal else int(literal)


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _coordinates(text: str) -> tuple[int | float, int | float] | None:
    """The first `lat, lng` pair; one of them must have decimals, so "3, 4 apples" is no place."""
    for m in _COORDS.finditer(text):
        if "." in m.group(1) + m.group(3):
            lat, lng = _number(m.group(1)), _number(m.group(3))
            lat = -lat if (m.group(2) or "").upper() == "S" else lat
            lng = -lng if (m.group(4) or "").upper() == "W" else lng
            return lat, lng
    return None


def _named_number(name: str, text: str) -> int | float | None:
    lowered = name.lower()
    names = _LAT_NAMES if lowered in _LAT_NAMES else _LNG_NAMES if lowered in _LNG_NAMES else (name,)
    for n in names:
        spelled = re.escape(n).replace("_", r"[\s_]+")
        after = re.search(rf"\b{spelled}\b\s*(?:of|is|=|:)?\s*({_NUM}){_EDGE_R}", text, re.I)
        found = after or re.search(rf"{_EDGE_L}({_NUM})\s*(?:[a-z]+\s+)?{spelled}\b", text, re.I)
        if found:
            return _number(found.group(1))
    return None


def _fill_number(name: str, prop: dict[str, Any], text: str) -> Any:
    value: int | float | None = _named_number(name, text)
    coords = _coordinates(text)
    lowered = name.lower()
    if value is None and coords is not None:
        if lowered in _LAT_NAMES or lowered.endswith("_lat"):
            value = coords[0]
        elif lowered in _LNG_NAMES or lowered.endswith(("_lng", "_lon")):
            value = coords[1]
    about = f"{name} {prop.get('description', '')}".lower()
    if value is None and any(w in about for w in ("radius", "distance", "meter", "metre")):
        unit = _UNIT.search(text)
        if unit:
            value = _number(unit.group(1)) * (1000 if unit.group(2).lower().startswith("k") else 1)
    if value is None:
        return prop.get("default", _MISSING)
    if prop.get("type") == "integer":
        return int(value) if float(value).is_integer() else prop.get("default", _MISSING)
    return value


def _pattern_match(pattern: str, candidates: list[str]) -> str | None:
    try:
        return next((c for c in candidates if c and re.search(pattern, c)), None)
    except re.error:
        return None


def _fill_string(prop: dict[str, Any], text: str) -> Any:
    pattern = prop.get("pattern")
    if isinstance(pattern, str):
        tokens = [t.strip(".:/-") for regex in _TOKENS for t in regex.findall(text)]
        found = _pattern_match(pattern, [c for t in tokens for c in (t, t.upper())])
        return prop.get("default", _MISSING) if found is None else found
    fmt = _FORMATS.get(str(prop.get("format", "")))
    if fmt is not None:
        match = fmt.search(text)
        return match.group(0) if match else prop.get("default", _MISSING)
    quoted = _QUOTED.search(text)
    return quoted.group(1) if quoted else prop.get("default", _MISSING)


def _fits(kind: Any, value: Any) -> bool:
    if kind in ("number", "integer"):
        return _is_num(value)
    return isinstance(value, str) if kind == "string" else True


def _from_results(name: str, prop: dict[str, Any], kind: Any, known: dict[str, Any]) -> Any:
    if name in known and _fits(kind, known[name]):
        return known[name]
    pattern = prop.get("pattern")
    if kind == "string" and isinstance(pattern, str):
        found = _pattern_match(pattern, [v for v in known.values() if isinstance(v, str)])
        return _MISSING if found is None else found
    return _MISSING


def _fill(
    schema: dict[str, Any], text: str, known: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Arguments read from `text` (then from earlier results), and the required ones still missing."""
    args: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if "enum" in prop:
            said = {w.lower() for w in _WORD.findall(text)}
            value = next((v for v in prop["enum"] if str(v).lower() in said), prop.get("default", _MISSING))
        elif kind in ("number", "integer"):
            value = _fill_number(name, {**prop, "type": kind}, text)
        elif kind == "string":
            value = _fill_string(prop, text)
        else:
            value = prop.get("default", _MISSING)
        if value is _MISSING and known and name in required:
            value = _from_results(name, prop, kind, known)
        if value is not _MISSING:
            args[name] = value
    return args, [r for r in required if r not in args]


# --- reading the results ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Outcome:
    title: str
    label: str
    args: dict[str, Any]
    data: Any
    text: str
    failed: bool


def _title(tool_name: str) -> str:
    words = _WORD.findall(tool_name)
    if len(words) > 1 and words[0].lower() in _VERBS:
        words = words[1:]
    return " ".join(words).capitalize()


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.6g}" if abs(value) < 1e6 else str(value)
    return str(value)


def _parse(content: str) -> tuple[Any, str]:
    lines = content.strip().splitlines()
    if len(lines) > 1 and _ANCHOR.match(lines[0]):
        lines = lines[1:]
    text = "\n".join(lines).strip()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("{", "[")):
            try:
                return json.loads("\n".join(lines[i:])), text
            except ValueError:
                break
    return None, text


def _outcomes(since: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[_Outcome]:
    calls = {c.id: c for m in since for c in m.tool_calls}
    specs = {t.name: t for t in tools}
    out: list[_Outcome] = []
    for m in since:
        if m.role != "tool":
            continue
        call = calls.get(m.tool_call_id or "")
        name = call.name if call else (m.name or "tool")
        try:
            args = json.loads(call.arguments) if call else {}
        except ValueError:
            args = {}
        args = args if isinstance(args, dict) else {}
        data, text = _parse(m.content or "")
        if isinstance(data, dict) and set(data) == {"superseded"}:
            continue  # the host replaced an earlier result of a repeated call; the later one counts
        spec = specs.get(name)
        shown = (spec.parameters.get("required") or list(args)) if spec else list(args)
        label = ", ".join(_fmt(args[k]) for k in shown if k in args)
        failed = m.is_error or (isinstance(data, dict) and bool(data.get("error")) and len(data) <= 3)
        out.append(_Outcome(_title(name), f" for {label}" if label else "", args, data, text, failed))
    return out


# --- writing the answer -----------------------------------------------------------------------------


def _split_unit(key: str) -> tuple[str, str]:
    """`temperature_c` → (`temperature`, ` °C`); the unit is "" when the key names none."""
    k = key.lower()
    if k.endswith("_ms"):
        return k[:-3], " m/s" if "speed" in k or "wind" in k else " ms"
    for suffix, unit in _UNITS:
        if k.endswith(suffix):
            return k[: -len(suffix)], unit
    if "temp" in k:
        return k, " °C"
    if "humidity" in k:
        return k, "%"
    if "distance" in k:
        return k, " m"
    return k, ""


def _human(key: str) -> str:
    return " ".join(_WORD.findall(key)).lower()


def _item(value: Any) -> str:
    if not isinstance(value, dict):
        return _fmt(value)
    name = next((value[k] for k in ("name", "title", "label", "place") if k in value), None)
    kind = next((value[k] for k in ("type", "kind", "category") if k in value), None)
    units = ((v, _split_unit(k)[1]) for k, v in value.items() if _is_num(v))
    dist = next((f" {_fmt(v)}{unit}" for v, unit in units if unit in (" m", " km")), "")
    if name is None:
        return ", ".join(f"{_human(k)} {_fmt(v)}" for k, v in list(value.items())[:3])
    return f"{name}" + (f" ({_human(str(kind))})" if kind else "") + dist


def _scalar(key: str, value: Any, siblings: dict[str, Any], parent: str) -> str | None:
    k = key.lower()
    if (k == "aqi" or k.endswith("_aqi")) and _is_num(value):
        label = next((siblings[x] for x in _LABEL_KEYS if isinstance(siblings.get(x), str)), None)
        return f"AQI {_fmt(value)}" + (f" ({label})" if label else "")
    if k in _LABEL_KEYS and any(x.lower() == "aqi" for x in siblings):
        return None  # already shown next to the AQI
    base, unit = _split_unit(key)
    name = _human(base)
    if parent and name in _GENERIC_CHILD:
        name = f"{parent} {name}"
    return f"{name} {_fmt(value)}{unit if _is_num(value) else ''}"


def _facts(data: Any, args: dict[str, Any], parent: str = "") -> tuple[list[str], list[str]]:
    """Short phrases and longer notes from a JSON result, in the result's own order."""
    if isinstance(data, list):
        return [], [f"{len(data)} items: " + ", ".join(_item(v) for v in data[:5])]
    if not isinstance(data, dict):
        return [_fmt(data)], []
    phrases: list[str] = []
    notes: list[str] = []
    for key, value in data.items():
        if key.lower() in _NOISE or key.lower().endswith("_id") or value is None or value == "":
            continue
        if isinstance(value, dict):
            if not parent:  # one level of nesting reads fine; deeper is detail for the attachment
                inner = _facts(value, args, _human(key))
                phrases, notes = phrases + inner[0], notes + inner[1]
        elif isinstance(value, list):
            shown = ", ".join(_item(v) for v in value[:5]) or "none"
            more = f" (+{len(value) - 5} more)" if len(value) > 5 else ""
            notes.append(f"{_human(key).capitalize()}: {shown}{more}")
        elif isinstance(value, str) and len(value.split()) >= 5:
            notes.append(f"{_human(key).capitalize()}: {value}")
        elif args.get(_split_unit(key)[0]) != value:  # the call's own arguments, echoed back, say nothing
            phrase = _scalar(key, value, data, parent)
            if phrase:
                phrases.append(phrase)
    return phrases, notes


def _line(o: _Outcome) -> str:
    if o.failed:
        reason = o.text
        if isinstance(o.data, dict):
            reason = str(next((o.data[k] for k in ("error", "message", "detail") if k in o.data), reason))
        reason = _FAILED_PREFIX.sub("", reason.splitlines()[-1] if reason else "") or "no reason given"
        return f"**{o.title}**{o.label}: the tool failed — {truncate(reason, 200)[0]}"
    if o.data is None:
        return f"**{o.title}**{o.label}: {truncate(' '.join(o.text.split()), 300)[0] or '(empty result)'}"
    phrases, notes = _facts(o.data, o.args)
    body = "; ".join(p for p in [", ".join(phrases[:8]), *notes] if p)
    return f"**{o.title}**{o.label}: {body or 'no details returned'}"


def _find_dict(data: Any, want: Callable[[str, Any], bool]) -> dict[str, Any] | None:
    """The first dict anywhere in `data` holding a key/value that satisfies `want`."""
    if isinstance(data, dict) and any(want(k.lower(), v) for k, v in data.items()):
        return data
    children = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    return next((found for c in children if (found := _find_dict(c, want)) is not None), None)


def _value(data: Any, want: Callable[[str, Any], bool]) -> Any:
    home = _find_dict(data, want)
    return None if home is None else next(v for k, v in home.items() if want(k.lower(), v))


def _is_aqi(key: str, value: Any) -> bool:
    return (key == "aqi" or key.endswith("_aqi")) and _is_num(value)


def _air_state(aqi: Any, label: str | None) -> str | None:
    if aqi is not None:
        return "good" if aqi <= 50 else "moderate" if aqi <= 100 else "poor"
    if not label:
        return None
    if any(w in label.lower() for w in ("unhealthy", "poor", "bad", "hazard", "severe", "污染", "差")):
        return "poor"
    return "moderate" if "moderate" in label.lower() else "good"


def _green_by_type(key: str, value: Any) -> bool:
    return key in ("type", "kind") and any(g in str(value).lower() for g in _GREEN)


def _green_by_name(key: str, value: Any) -> bool:
    return key == "name" and any(g in str(value).lower() for g in _GREEN)


def _green_spot(results: list[Any]) -> str | None:
    """Where the first park-like place in the results is ("Century Park is 320 m away")."""
    for want in (_green_by_type, _green_by_name):
        place = _find_dict(results, want)
        if place is not None and "name" in place:
            dist = next((v for k, v in place.items() if "distance" in k.lower() and _is_num(v)), None)
            return f"{place['name']} is " + (f"{_fmt(dist)} m away" if dist is not None else "nearby")
    return None


def _verdict(question: str, results: list[Any]) -> str | None:
    """For "is it good for a run?" questions: one sentence weighing air, temperature and a park."""
    found = _OUTDOOR.search(question.lower())
    if found is None:
        return None
    activity = next((v for k, v in _ACTIVITY.items() if found.group(0).startswith(k)), "being outdoors")
    home = _find_dict(results, _is_aqi)
    aqi = None if home is None else _value(home, _is_aqi)
    label = next((home[x] for x in _LABEL_KEYS if isinstance(home.get(x), str)), None) if home else None
    label = label or _value(results, lambda k, v: k in ("air_quality", "quality") and isinstance(v, str))
    temp = _value(results, lambda k, v: "temp" in k and _is_num(v))
    state = _air_state(aqi, label)
    spot = _green_spot(results)
    air = f"the air is {(label or state or '').lower()}" + (f" (AQI {_fmt(aqi)})" if aqi is not None else "")
    if state == "poor":
        return (
            f"**Not a great time for {activity}**: {air}. Consider going indoors or waiting for cleaner air."
        )
    if state is None and spot:
        return f"**Maybe**: {spot}, but I couldn't get air-quality data to be sure."
    if state is None:
        return f"**I can't tell** whether it's good for {activity}: no air-quality data came back."
    reasons = [air] + ([f"it's {_fmt(temp)} °C"] if temp is not None else []) + ([spot] if spot else [])
    joined = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]
    comfortable = temp is None or 0 <= temp <= 30
    head = f"Yes, it looks good for {activity}" if state == "good" and comfortable else "Possibly, with care"
    return f"**{head}**: {joined}."


def _answer(question: str, outcomes: list[_Outcome]) -> str:
    lines = "\n".join(f"- {_line(o)}" for o in outcomes)
    if all(o.failed for o in outcomes):
        return f"Sorry, I couldn't get that information: the service is temporarily unavailable.\n\n{lines}"
    verdict = _verdict(question, [o.data for o in outcomes if not o.failed])
    found = f"Here's what I found:\n\n{lines}"
    return f"{verdict}\n\n{found}" if verdict else found


# --- answering without tools ------------------------------------------------------------------------


def _purpose(tool: ToolSpec) -> str:
    first = re.split(r"(?<=[.!?。])\s", tool.description.strip(), maxsplit=1)[0]
    needs = tool.parameters.get("required") or []
    return truncate(first, 100)[0] + (f" (needs {', '.join(needs)})" if needs else "")


def _example(tool: ToolSpec) -> str:
    """A question this model would turn into a call of `tool`, built from its schema."""
    properties = tool.parameters.get("properties") or {}
    values: list[str] = []
    for name in tool.parameters.get("required") or []:
        found = properties.get(name)
        prop: dict[str, Any] = found if isinstance(found, dict) else {}
        given = (prop.get("examples") or [prop.get("default")])[0]
        if given is None and name.lower() in _LAT_NAMES:
            given = 31.23
        elif given is None and name.lower() in _LNG_NAMES:
            given = 121.47
        values.append(f"<{name}>" if given is None else _fmt(given))
    return _title(tool.name) + (f" for {', '.join(values)}?" if values else "?")


def _help(tools: Sequence[ToolSpec], missing: list[tuple[ToolSpec, list[str]]]) -> str:
    intro = "I'm the offline model, a simple rule-based stand-in used because no model API key is set."
    real = "For free-form questions, set `OPENAI_API_KEY` (or `OPENAI_BASE_URL` and `NERVE_MODEL`)."
    if not tools:
        return f"{intro} No tools are connected right now: add an MCP server to the servers file.\n\n{real}"
    if missing:
        tool, unfilled = missing[0]
        why = f"`{tool.name}` looks relevant, but I couldn't find {', '.join(unfilled)} in your message."
    else:
        why = "I can only answer by calling a tool, and none of mine fits that question."
    listing = "\n".join(f"- `{t.name}`: {_purpose(t)}" for t in tools[:10])
    examples = [_example(t) for t in tools]
    example = next((e for e in examples if "<" not in e), examples[0])
    return f"{intro} {why}\n\nTools I can use:\n{listing}\n\nFor example: “{example}”\n\n{real}"


def _greeting(words: list[str], tools: Sequence[ToolSpec]) -> str:
    if any(w in ("thanks", "thank", "谢谢") for w in words):
        return "You're welcome!"
    names = ", ".join(f"`{t.name}`" for t in tools[:10]) or "no tools yet"
    return f"Hello! I'm nerve, running on the built-in offline model. I can use: {names}. Ask me something."

"""The offline model: what answers when no model service is configured.

It lets `make run` do something real on a fresh clone (call the configured MCP servers and report
what they said) without an API key, a network or a download. It understands no language: it matches
words and reads JSON Schemas, and it says so in its replies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bot.model.offline.answer import (
    WORD,
    Outcome,
    format_value,
    is_number,
    read_outcomes,
    tool_title,
    write_answer,
)
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.render import truncate
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, Usage

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
_NEGATIVE = re.compile(r"^(do not|don't|never|not for|avoid)\b", re.I)
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
            outcomes = read_outcomes(since, tools)
            message = _follow_up(question, since, outcomes, tools, first_id) or ChatMessage(
                role="assistant", content=write_answer(question, outcomes)
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
    words = [w.lower() for w in WORD.findall(text)]
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
    words = [w.lower() for w in WORD.findall(question)]
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
    outcomes: list[Outcome],
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
        return is_number(value)
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
            said = {w.lower() for w in WORD.findall(text)}
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
        values.append(f"<{name}>" if given is None else format_value(given))
    return tool_title(tool.name) + (f" for {', '.join(values)}?" if values else "?")


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

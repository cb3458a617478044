"""Guards between the model and the tools: argument checks (S13), loop guard (S7), confirm nudge (S12).

The model is never trusted to follow a schema or to stop on its own; each guard turns a failure into
a message the model can act on, or into a plain answer for the user.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from bot.text.nesting import MAX_DEPTH, TooDeep, loads
from bot.text.render import QUOTE_CHARS, quote, shorten_runs, truncate
from bot.text.scrubbing import scrub
from bot.types import ToolSpec

MAX_SAME_CALLS = 3
# One problem's message, at most: the value it quotes is cut well before this.
PROBLEM_CHARS = 600


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedArguments:
    """Arguments that passed the checks (`value`), or what is wrong (`detail`) and what to do (`hint`)."""

    value: dict[str, Any] | None = None
    detail: str | None = None
    hint: str = ""

    @property
    def problem(self) -> str | None:
        """Everything the model is told: what is wrong, then how to fix it."""
        if self.detail is None:
            return None
        return f"{self.detail}. {self.hint}" if self.hint else self.detail


def _coerce(value: Any, schema: dict[str, Any]) -> Any:
    """Safe, lossless coercions only: "12.5" → 12.5, "3" → 3, "true" → True, 7 → "7"."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if isinstance(value, str):
        text = value.strip()
        if "integer" in kinds and re.fullmatch(r"[-+]?\d+", text):
            return int(text)
        if "number" in kinds and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
            return float(text)
        if "boolean" in kinds and text.lower() in ("true", "false"):
            return text.lower() == "true"
    elif isinstance(value, float) and "integer" in kinds and "number" not in kinds and value.is_integer():
        return int(value)
    elif isinstance(value, int | float) and not isinstance(value, bool) and kinds == ["string"]:
        return str(value)
    elif isinstance(value, dict) and "object" in kinds:
        return _coerce_object(value, schema)
    elif isinstance(value, list) and "array" in kinds and isinstance(schema.get("items"), dict):
        return [_coerce(item, schema["items"]) for item in value]
    return value


def _coerce_object(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {
        key: _coerce(item, properties[key]) if isinstance(properties.get(key), dict) else item
        for key, item in value.items()
    }


def _describe(error: schema_errors.ValidationError) -> str:
    """jsonschema's message with the value quoted short: it holds the whole value's repr, for the model."""
    message = error.message
    if isinstance(error.instance, str | list | dict):
        whole = repr(error.instance)
        if len(whole) > QUOTE_CHARS:
            message = message.replace(whole, quote(error.instance))
    where = ".".join(str(part) for part in error.absolute_path)
    described = f"{where}: {message}" if where else message
    return truncate(shorten_runs(described), PROBLEM_CHARS)[0]


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON, and they slip past every minimum/maximum check."""
    raise ValueError(f"the arguments contain {name}, which is not a valid JSON number")


def _finite_float(text: str) -> float:
    """`1e400` is valid JSON that Python reads as infinity, which no server can be sent as JSON."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the arguments contain the number {text[:40]}, which is too large to send")
    return value


def _scrubbed(value: Any) -> Any:
    """`value` with lone surrogates replaced in every key and string: no server can be sent them."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def _no_retrieval(uri: str) -> Any:
    """`$ref`s resolve within the schema only: a fetch would block and let any server aim nerve anywhere."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


_LOCAL_ONLY: Registry[Any] = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]
_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """A checked validator per schema object (checking costs ~50x using), keyed on the object's identity."""
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    validator_class = validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
        validator = validator_class(schema, registry=_LOCAL_ONLY)
    except schema_errors.SchemaError:
        validator = None
    if len(_VALIDATORS) > 1024:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _drop_optional_nulls(value: dict[str, Any], schema: dict[str, Any], validator: Any) -> dict[str, Any]:
    """An optional argument given as null was not given: models write `"unit": null` for "no unit".

    Only a null the argument's schema refuses is dropped; a required argument keeps its null and its error."""
    if not any(item is None for item in value.values()):
        return value
    required = set(schema.get("required") or ())
    refused = {
        error.absolute_path[0]
        for error in validator.iter_errors(value)
        if len(error.absolute_path) == 1 and error.instance is None and error.absolute_path[0] not in required
    }
    return {key: item for key, item in value.items() if key not in refused}


def parse_arguments(raw: str, spec: ToolSpec) -> ParsedArguments:
    schema = spec.parameters or {"type": "object"}
    hint = f"Call {spec.name} again with a JSON object that matches its parameters schema."

    def refuse(detail: str) -> ParsedArguments:
        return ParsedArguments(detail=detail, hint=hint)

    text = raw.strip()
    if not text:
        if schema.get("required"):
            return refuse(f"no arguments were given; required: {', '.join(schema['required'])}")
        return ParsedArguments(value={})
    try:
        loaded = loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        return refuse(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})")
    except TooDeep:
        return refuse(f"the arguments are nested deeper than {MAX_DEPTH} levels, more than any tool accepts")
    except ValueError as exc:
        return refuse(str(exc))
    if not isinstance(loaded, dict):
        return refuse(f"the arguments must be a JSON object, not {type(loaded).__name__}")
    if "\\u" in text or not text.isascii():
        loaded = _scrubbed(loaded)
    value = _coerce_object(loaded, schema)
    validator = _validator(schema)
    if validator is None:
        # A server with a broken schema should not make its tool unusable; it validates its own input.
        return ParsedArguments(value=value)
    try:
        value = _drop_optional_nulls(value, schema, validator)
        problems = sorted(_describe(error) for error in validator.iter_errors(value))
    except Unresolvable:
        # A `$ref` outside the schema (a URL) cannot be checked here; the server checks its own input.
        return ParsedArguments(value=value)
    return refuse("; ".join(problems)) if problems else ParsedArguments(value=value)


@dataclass(slots=True)
class LoopGuard:
    """Counts identical calls within one turn so a model cannot call the same thing forever (S7)."""

    _seen: Counter[tuple[str, str]] = field(default_factory=Counter, init=False)

    def allow(self, name: str, arguments: dict[str, Any]) -> bool:
        """Record the call; False once the same tool with the same arguments exceeds MAX_SAME_CALLS."""
        key = (name, json.dumps(arguments, sort_keys=True, ensure_ascii=False))
        self._seen[key] += 1
        return self._seen[key] <= MAX_SAME_CALLS


_GREETING = re.compile(
    r"^\s*(hi|hello|hey|thanks|thank you|thx|ok|okay|bye|good (morning|evening|night)|你好|谢谢)\b[\s!.,?]*$",
    re.IGNORECASE,
)


def triggered_tools(text: str, tools: Iterable[ToolSpec]) -> list[str]:
    """Tools whose trigger words appear in the user's message (whole words, any case)."""
    if _GREETING.match(text):
        return []
    lowered = text.lower()
    return [tool.name for tool in tools if any(_mentions(lowered, word.lower()) for word in tool.triggers)]


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _mentions(text: str, word: str) -> bool:
    """A whole-word match; Chinese, Japanese and Korean have no spaces, so there a substring is a word."""
    if _CJK.search(word):
        return word in text
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def confirm_prompt(tool_names: Sequence[str]) -> str:
    """The one nudge sent when the model answered a trigger question without any tool (S12)."""
    listed = ", ".join(tool_names)
    return (
        "Before you answer: this question looks like it needs real-time data, which must come from a "
        f"tool (for example {listed}). Are you sure no tool is needed? If one is, call it now; "
        "if not, repeat your answer."
    )

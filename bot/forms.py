"""Forms a server asks people to fill in (MCP elicitation, form mode): the schema read into fields.

A server sends a restricted JSON Schema (a flat object of primitive properties). Front ends show
fields, never schemas: this module reads the schema once into `FormField`s that every surface
renders its own way, and checks what people typed against the same fields, so Slack, Discord and
the terminal accept and refuse exactly the same answers.

Defaults: `parse_field` (one typed answer, the terminal) takes a field's default for empty text;
`check_answer` (a whole submitted form) takes only what was sent, because surfaces that show a
form pre-fill the defaults and a field the person emptied is one they chose to leave empty.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

FieldKind = Literal[
    "text", "email", "uri", "date", "date-time", "number", "integer", "boolean", "choice", "choices"
]
FieldValue = str | int | float | bool | tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FormField:
    """One property of the requested schema, as people see it.

    `choice` is one of `options` (enum, oneOf/anyOf titled); `choices` is several (array of enum).
    `options` holds (value, label) pairs in the server's order.
    """

    name: str
    title: str
    kind: FieldKind
    description: str = ""
    required: bool = False
    default: FieldValue | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    min_items: int | None = None
    max_items: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Form:
    """The fields of one request, in the schema's order."""

    fields: tuple[FormField, ...]


class FormError(ValueError):
    """The schema asks for something no surface can show; the server is answered "decline"."""


class FieldError(ValueError):
    """What a person typed does not fit the field; the message says what would."""


# What a required field left empty is told, on every surface.
REQUIRED = "This is required: please fill it in."

_FORMATS: dict[str, FieldKind] = {"email": "email", "uri": "uri", "date": "date", "date-time": "date-time"}


def form_from_schema(schema: Mapping[str, Any]) -> Form:
    """Read a `requestedSchema` into fields, in property order; `FormError` for what cannot be shown."""
    if not isinstance(schema, Mapping):
        raise FormError("the request has no form to fill in")
    if schema.get("type", "object") != "object":
        raise FormError("the request's form is not a set of named fields")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        raise FormError("the request's form has no fields")
    required_raw = schema.get("required") or ()
    if not isinstance(required_raw, Sequence) or isinstance(required_raw, str):
        raise FormError("the request's list of required fields is malformed")
    required = {name for name in required_raw if isinstance(name, str)}
    fields = tuple(
        _read_property(str(name), prop, str(name) in required) for name, prop in properties.items()
    )
    return Form(fields=fields)


def _read_property(name: str, prop: object, required: bool) -> FormField:
    if not isinstance(prop, Mapping):
        raise FormError(f'field "{name}" is malformed')
    title = prop.get("title")
    description = prop.get("description")
    base = FormField(
        name=name,
        title=title.strip() if isinstance(title, str) and title.strip() else name,
        kind="text",
        description=description.strip() if isinstance(description, str) else "",
        required=required,
    )
    kind = prop.get("type")
    options = _options(prop)
    if options is not None and kind in ("string", None):
        field = replace(base, kind="choice", options=options)
    elif kind == "string":
        fmt = prop.get("format")
        field = replace(
            base,
            kind=_FORMATS.get(fmt, "text") if isinstance(fmt, str) else "text",
            min_length=_count(prop.get("minLength")),
            max_length=_count(prop.get("maxLength")),
        )
    elif kind in ("number", "integer"):
        field = replace(
            base,
            kind="integer" if kind == "integer" else "number",
            minimum=_bound(prop.get("minimum")),
            maximum=_bound(prop.get("maximum")),
        )
    elif kind == "boolean":
        field = replace(base, kind="boolean")
    elif kind == "array":
        items = prop.get("items")
        item_options = _options(items) if isinstance(items, Mapping) else None
        if item_options is None:
            raise FormError(f'field "{name}" asks for a list of free values, which cannot be shown as a form')
        field = replace(
            base,
            kind="choices",
            options=item_options,
            min_items=_count(prop.get("minItems")),
            max_items=_count(prop.get("maxItems")),
        )
    elif kind == "object":
        raise FormError(f'field "{name}" asks for a group of values, which cannot be shown as a form')
    else:
        raise FormError(f'field "{name}" has a kind of value that cannot be shown as a form')
    return _with_default(field, prop.get("default"))


def _options(prop: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """(value, label) pairs of an enum or a oneOf/anyOf of titled constants; None when neither."""
    enum = prop.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
            raise FormError("a list of choices must hold words, and at least one")
        names = prop.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum) and all(isinstance(n, str) for n in names):
            return tuple(zip(enum, names, strict=True))
        return tuple((value, value) for value in enum)
    for key in ("oneOf", "anyOf"):
        titled = prop.get(key)
        if titled is None:
            continue
        if not isinstance(titled, list) or not titled:
            raise FormError("a list of choices must hold at least one")
        pairs: list[tuple[str, str]] = []
        for item in titled:
            if not isinstance(item, Mapping) or not isinstance(item.get("const"), str):
                raise FormError("a choice must be a word with a label")
            label = item.get("title")
            pairs.append((item["const"], label if isinstance(label, str) and label else item["const"]))
        return tuple(pairs)
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bound(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def _with_default(field: FormField, default: object) -> FormField:
    """Keep the server's default only when it is itself a valid answer for the field."""
    if default is None:
        return field
    try:
        value = _coerce(field, default)
    except FieldError:
        return field
    return field if value is None else replace(field, default=value)


# --- secrets ---------------------------------------------------------------------------------------

# Word sequences that mark a secret; matched against whole words (camelCase and snake_case split).
_SECRET_WORDS: tuple[tuple[str, ...], ...] = (
    ("password",),
    ("passwd",),
    ("passcode",),
    ("passphrase",),
    ("token",),
    ("api", "key"),
    ("apikey",),
    ("secret",),
    ("private", "key"),
    ("privatekey",),
    ("credential",),
    ("credentials",),
    ("ssn",),
    ("social", "security", "number"),
    ("credit", "card"),
    ("creditcard",),
    ("card", "number"),
    ("cvv",),
    ("cvc",),
    ("pin",),
)
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _mentions_secret(text: str) -> bool:
    words = _words(text)
    return any(tuple(words[i : i + len(seq)]) == seq for seq in _SECRET_WORDS for i in range(len(words)))


def secret_fields(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The properties that look like they ask for a secret, which a form must never collect.

    By name, title or description (whole words: "github_token" and "API Key" count, "tokenizer"
    and "spinach" do not), `format: password`, or `writeOnly: true`.
    """
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return ()
    found: list[str] = []
    for name, prop in properties.items():
        spec = prop if isinstance(prop, Mapping) else {}
        texts = [str(name)] + [spec[k] for k in ("title", "description") if isinstance(spec.get(k), str)]
        if (
            spec.get("format") == "password"
            or spec.get("writeOnly") is True
            or any(_mentions_secret(text) for text in texts)
        ):
            found.append(str(name))
    return tuple(found)


# --- answers ---------------------------------------------------------------------------------------

_TRUE = {"yes", "y", "true", "1"}
_FALSE = {"no", "n", "false", "0"}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<hm>\d{2}:\d{2})(?P<s>:\d{2}(?:\.\d+)?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}:\d{2})"
)


def parse_field(field: FormField, text: str) -> FieldValue | None:
    """One typed answer as the field's value: empty text is the default (or None); `FieldError`
    says what would fit."""
    if not text.strip():
        return field.default
    return _coerce(field, text)


def check_answer(form: Form, raw: Mapping[str, object]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """A submitted form as content for the server, or None and a message for every field that is wrong.

    Takes strings (text inputs), lists of strings (multi-selects), bools and numbers; keys that are
    not fields are ignored; an empty optional field is left out.
    """
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in form.fields:
        try:
            value = _coerce(field, raw.get(field.name))
        except FieldError as error:
            errors[field.name] = str(error)
            continue
        if value is None:
            if field.required:
                errors[field.name] = REQUIRED
            continue
        content[field.name] = list(value) if isinstance(value, tuple) else value
    return (None, errors) if errors else (content, {})


def _coerce(field: FormField, value: object) -> FieldValue | None:
    """Any one submitted value (typed or text) as the field's value; None when nothing was given."""
    if value is None:
        return None
    if field.kind == "choices":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
            raise FieldError(_choices_hint(field))
        return _pick_several(field, items)
    if isinstance(value, list | tuple) and field.kind == "choice" and len(value) <= 1:
        value = value[0] if value else ""
    if isinstance(value, bool):
        if field.kind == "boolean":
            return value
        raise FieldError(_expected(field))
    if isinstance(value, int | float):
        if field.kind in ("number", "integer"):
            return _number(field, value)
        value = _plain(value)
    if not isinstance(value, str):
        raise FieldError(_expected(field))
    text = value.strip()
    if not text:
        return None
    return _from_text(field, text)


def _from_text(field: FormField, text: str) -> FieldValue:
    kind = field.kind
    if kind == "boolean":
        word = text.lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise FieldError("Answer yes or no.")
    if kind in ("number", "integer"):
        try:
            number = float(text) if kind == "number" or not text.lstrip("+-").isdigit() else int(text)
        except ValueError:
            raise FieldError(_expected(field)) from None
        return _number(field, number)
    if kind == "choice":
        return _pick(field, text)
    if kind == "email" and not _EMAIL.fullmatch(text):
        raise FieldError("Enter an email address, like name@example.com.")
    if kind == "uri":
        return _uri(text)
    if kind == "date":
        return _date(text)
    if kind == "date-time":
        return _date_time(text)
    return _text(field, text)


def _text(field: FormField, text: str) -> str:
    if field.min_length is not None and len(text) < field.min_length:
        raise FieldError(f"Use at least {_characters(field.min_length)} (this has {len(text)}).")
    if field.max_length is not None and len(text) > field.max_length:
        raise FieldError(f"Use at most {_characters(field.max_length)} (this has {len(text)}).")
    return text


def _characters(n: int) -> str:
    return "1 character" if n == 1 else f"{n} characters"


def _uri(text: str) -> str:
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:
        host = None
    if not host or not parts.scheme or any(c.isspace() for c in text):
        raise FieldError("Enter a full link with its scheme and host, like https://example.com/page.")
    return text


def _date(text: str) -> str:
    try:
        if _DATE.fullmatch(text):
            date.fromisoformat(text)
            return text
    except ValueError:
        pass
    raise FieldError("Enter a date as YYYY-MM-DD, like 2026-12-31.")


def _date_time(text: str) -> str:
    """An ISO 8601 date and time with a zone, written back the way RFC 3339 wants it."""
    match = _DATE_TIME.fullmatch(text)
    if match:
        zone = match.group("tz").upper()
        normal = f"{match.group('date')}T{match.group('hm')}{match.group('s') or ':00'}{zone}"
        try:
            datetime.fromisoformat(normal.replace("Z", "+00:00"))
            return normal
        except ValueError:
            pass
    raise FieldError(
        "Enter a date and time with a time zone, like 2026-12-31T18:30:00Z or 2026-12-31T18:30+01:00."
    )


def _number(field: FormField, number: float) -> int | float:
    if isinstance(number, float) and not math.isfinite(number):
        raise FieldError(_expected(field))
    if field.kind == "integer":
        if isinstance(number, float):
            if not number.is_integer():
                raise FieldError(_expected(field))
            number = int(number)
    elif isinstance(number, float) and number.is_integer() and abs(number) < 2**53:
        number = int(number)
    if (field.minimum is not None and number < field.minimum) or (
        field.maximum is not None and number > field.maximum
    ):
        raise FieldError(_expected(field))
    return number


def _is_option(field: FormField, text: str) -> bool:
    folded = text.casefold()
    return any(folded in (value.casefold(), label.casefold()) for value, label in field.options)


def _pick(field: FormField, text: str) -> str:
    """An option's value from its value or its label (any case)."""
    for value, _ in field.options:
        if text == value:
            return value
    folded = text.casefold()
    for value, label in field.options:
        if folded in (value.casefold(), label.casefold()):
            return value
    raise FieldError(f"Choose one of: {_labels(field)}.")


def _pick_several(field: FormField, items: Sequence[str]) -> tuple[str, ...] | None:
    """Values from selected items, or from one typed line of them separated by commas."""
    picked: list[str] = []
    unknown: list[str] = []
    for item in items:
        whole = item.strip()
        parts = [whole] if _is_option(field, whole) else [part.strip() for part in whole.split(",")]
        for part in parts:
            if not part:
                continue
            try:
                value = _pick(field, part)
            except FieldError:
                unknown.append(part)
                continue
            if value not in picked:
                picked.append(value)
    if unknown:
        raise FieldError(f"Not a choice: {', '.join(unknown)}. {_choices_hint(field)}")
    if not picked:
        return None
    if field.min_items is not None and len(picked) < field.min_items:
        raise FieldError(f"Choose at least {field.min_items} of: {_labels(field)}.")
    if field.max_items is not None and len(picked) > field.max_items:
        raise FieldError(f"Choose at most {field.max_items} of: {_labels(field)}.")
    return tuple(picked)


def _choices_hint(field: FormField) -> str:
    return f"Choose {describe_field(field)}."


def _expected(field: FormField) -> str:
    return f"Enter {describe_field(field)}."


# --- hints -----------------------------------------------------------------------------------------

_MAX_LISTED = 12


def describe_field(field: FormField) -> str:
    """A short hint for people: what the field takes ("a whole number from 1 to 10", "yes or no")."""
    kind = field.kind
    if kind == "boolean":
        return "yes or no"
    if kind == "email":
        return "an email address"
    if kind == "uri":
        return "a link like https://example.com"
    if kind == "date":
        return "a date like 2026-12-31"
    if kind == "date-time":
        return "a date and time like 2026-12-31T18:30:00Z"
    if kind in ("number", "integer"):
        return ("a whole number" if kind == "integer" else "a number") + _range(field.minimum, field.maximum)
    if kind == "choice":
        return f"one of: {_labels(field)}"
    if kind == "choices":
        return f"{_how_many(field.min_items, field.max_items)} of: {_labels(field)}"
    length = _length(field.min_length, field.max_length)
    return f"text, {length}" if length else "any text"


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {_plain(low)} to {_plain(high)}"
    if low is not None:
        return f" of at least {_plain(low)}"
    if high is not None:
        return f" of at most {_plain(high)}"
    return ""


def _length(low: int | None, high: int | None) -> str:
    if low and high is not None:
        return f"{low} to {_characters(high)}"
    if low:
        return f"at least {_characters(low)}"
    if high is not None:
        return f"at most {_characters(high)}"
    return ""


def _how_many(low: int | None, high: int | None) -> str:
    low = low or 0
    if high is not None and low == high:
        return f"exactly {high}"
    if high is not None:
        return f"up to {high}" if low <= 1 else f"{low} to {high}"
    return "one or more" if low <= 1 else f"at least {low}"


def _labels(field: FormField) -> str:
    labels = [label for _, label in field.options]
    shown = ", ".join(labels[:_MAX_LISTED])
    return shown + (f", … ({len(labels)} in all)" if len(labels) > _MAX_LISTED else "")


def _plain(number: float) -> str:
    """1.0 as "1", 2.5 as "2.5": numbers as people write them."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)

"""A server's schema read into fields once, when a question arrives (what no surface can show is
refused), and which of its fields ask for a secret."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.forms.answers import coerce
from bot.forms.fields import FieldError, FieldKind, Form, FormError, FormField

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
        value = coerce(field, default)
    except FieldError:
        return field
    return field if value is None else replace(field, default=value)


# --- secrets ---------------------------------------------------------------------------------------

# Word sequences that mark a secret; matched against whole words (camelCase and snake_case split).
_SECRET_PHRASES = (
    "password, passwd, passcode, passphrase, token, api key, apikey, secret, private key, privatekey, "
    "credential, credentials, ssn, social security number, credit card, creditcard, card number, cvv, cvc, "
    "pin"
)
_SECRET_WORDS = tuple(tuple(phrase.split()) for phrase in _SECRET_PHRASES.split(", "))
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _mentions_secret(text: str) -> bool:
    words = [word.lower() for word in _WORD.findall(text)]

    return any(tuple(words[i : i + len(seq)]) == seq for seq in _SECRET_WORDS for i in range(len(words)))


def secret_fields(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The properties that seem to ask for a secret (by whole words, `format: password`, `writeOnly`)."""
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

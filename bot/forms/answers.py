"""What people typed or submitted, checked against a form's fields and turned into values, the
same on every front end, typed one at a time or submitted whole."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

from bot.forms.fields import REQUIRED, FieldError, FieldValue, Form, FormField, plain
from bot.forms.hints import characters, describe_field, option_labels

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
    """One typed answer as the field's value: empty text is the default; `FieldError` says what fits."""
    if not text.strip():
        return field.default
    return coerce(field, text)


def check_answer(form: Form, raw: Mapping[str, object]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """A submitted form as content for the server (an empty optional field left out), or None and a
    message for every field that is wrong."""

    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in form.fields:
        try:
            value = coerce(field, raw.get(field.name))
        except FieldError as error:
            errors[field.name] = str(error)
            continue
        if value is None:
            if field.required:
                errors[field.name] = REQUIRED
            continue
        content[field.name] = list(value) if isinstance(value, tuple) else value
    return (None, errors) if errors else (content, {})


def coerce(field: FormField, value: object) -> FieldValue | None:
    """Any one submitted value (typed or text) as the field's value; None when nothing was given."""
    if value is None:
        return None
    if field.kind == "choices":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
            raise FieldError(f"Choose {describe_field(field)}.")
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
        value = plain(value)
    if not isinstance(value, str):
        raise FieldError(_expected(field))
    text = value.strip()
    return _from_text(field, text) if text else None


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
    if kind in _FORMATS:
        return _FORMATS[kind](text)
    if field.min_length is not None and len(text) < field.min_length:
        raise FieldError(f"Use at least {characters(field.min_length)} (this has {len(text)}).")
    if field.max_length is not None and len(text) > field.max_length:
        raise FieldError(f"Use at most {characters(field.max_length)} (this has {len(text)}).")
    return text


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
    with contextlib.suppress(ValueError):
        if _DATE.fullmatch(text) and date.fromisoformat(text):
            return text
    raise FieldError("Enter a date as YYYY-MM-DD, like 2026-12-31.")


def _date_time(text: str) -> str:
    """An ISO 8601 date and time with a zone, written back the way RFC 3339 wants it."""
    match = _DATE_TIME.fullmatch(text)
    if match:
        zone = match.group("tz").upper()
        normal = f"{match.group('date')}T{match.group('hm')}{match.group('s') or ':00'}{zone}"
        with contextlib.suppress(ValueError):
            if datetime.fromisoformat(normal.replace("Z", "+00:00")):
                return normal
    raise FieldError(
        "Enter a date and time with a time zone, like 2026-12-31T18:30:00Z or 2026-12-31T18:30+01:00."
    )


# The formats whose text is checked as a whole (no length limits).
_FORMATS = {"uri": _uri, "date": _date, "date-time": _date_time}


def _number(field: FormField, number: float) -> int | float:
    if isinstance(number, float):
        if not math.isfinite(number) or (field.kind == "integer" and not number.is_integer()):
            raise FieldError(_expected(field))
        if number.is_integer() and (field.kind == "integer" or abs(number) < 2**53):
            number = int(number)
    if (field.minimum is not None and number < field.minimum) or (
        field.maximum is not None and number > field.maximum
    ):
        raise FieldError(_expected(field))
    return number


def _matching(field: FormField, text: str) -> list[str]:
    folded = text.casefold()
    return [value for value, label in field.options if folded in (value.casefold(), label.casefold())]


def _pick(field: FormField, text: str) -> str:
    """An option's value from its value or its label (any case), an exact value first."""
    for value in [value for value, _ in field.options if value == text] or _matching(field, text):
        return value
    raise FieldError(f"Choose one of: {option_labels(field)}.")


def _pick_several(field: FormField, items: Sequence[str]) -> tuple[str, ...] | None:
    """Values from selected items, or from one typed line of them separated by commas."""
    picked: list[str] = []
    unknown: list[str] = []
    for item in items:
        whole = item.strip()
        parts = [whole] if _matching(field, whole) else [part.strip() for part in whole.split(",")]
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
        raise FieldError(f"Not a choice: {', '.join(unknown)}. Choose {describe_field(field)}.")
    if not picked:
        return None
    if field.min_items is not None and len(picked) < field.min_items:
        raise FieldError(f"Choose at least {field.min_items} of: {option_labels(field)}.")
    if field.max_items is not None and len(picked) > field.max_items:
        raise FieldError(f"Choose at most {field.max_items} of: {option_labels(field)}.")
    return tuple(picked)


def _expected(field: FormField) -> str:
    return f"Enter {describe_field(field)}."

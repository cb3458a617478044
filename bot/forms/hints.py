"""What a field takes, in words people read: the same beside a field on every surface, and to a refusal."""

from __future__ import annotations

from bot.forms.fields import FormField, plain

# --- hints -----------------------------------------------------------------------------------------

_MAX_LISTED = 12
_FIXED_HINTS = {
    "boolean": "yes or no",
    "email": "an email address",
    "uri": "a link like https://example.com",
    "date": "a date like 2026-12-31",
    "date-time": "a date and time like 2026-12-31T18:30:00Z",
}


def describe_field(field: FormField) -> str:
    """A short hint for people: what the field takes ("a whole number from 1 to 10", "yes or no")."""
    kind = field.kind
    if kind in _FIXED_HINTS:
        return _FIXED_HINTS[kind]
    if kind in ("number", "integer"):
        return ("a whole number" if kind == "integer" else "a number") + _range(field.minimum, field.maximum)
    if kind == "choice":
        return f"one of: {option_labels(field)}"
    if kind == "choices":
        return f"{_how_many(field.min_items, field.max_items)} of: {option_labels(field)}"
    length = _length(field.min_length, field.max_length)
    return f"text, {length}" if length else "any text"


def _range(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {plain(low)} to {plain(high)}"
    if low is not None:
        return f" of at least {plain(low)}"
    if high is not None:
        return f" of at most {plain(high)}"
    return ""


def _length(low: int | None, high: int | None) -> str:
    if low and high is not None:
        return f"{low} to {characters(high)}"
    if low:
        return f"at least {characters(low)}"
    if high is not None:
        return f"at most {characters(high)}"
    return ""


def _how_many(low: int | None, high: int | None) -> str:
    low = low or 0
    if high is not None and low == high:
        return f"exactly {high}"
    if high is not None:
        return f"up to {high}" if low <= 1 else f"{low} to {high}"
    return "one or more" if low <= 1 else f"at least {low}"


def option_labels(field: FormField) -> str:
    """The options of a choice, as people read them (the first dozen, and how many in all)."""
    labels = [label for _, label in field.options]
    shown = ", ".join(labels[:_MAX_LISTED])
    return shown + (f", … ({len(labels)} in all)" if len(labels) > _MAX_LISTED else "")


def characters(n: int) -> str:
    """A count of characters as people say it: "1 character", "5 characters"."""
    return "1 character" if n == 1 else f"{n} characters"

"""A form's fields as every surface shows them, and the errors reading or filling one raise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

FieldKind = Literal[
    "text", "email", "uri", "date", "date-time", "number", "integer", "boolean", "choice", "choices"
]
FieldValue = str | int | float | bool | tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FormField:
    """One property of the requested schema as people see it (`choice`: one of `options`; `choices`: some)."""

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
    # The codes of a yes-or-no select's options, on every surface.
    YES: ClassVar[str] = "true"
    NO: ClassVar[str] = "false"

    def picked(self, codes: Sequence[object]) -> bool | str | list[str] | None:
        """What a select's picked options give, by their codes: `YES`/`NO` for yes-or-no, else positions
        in `options` ("0", "1", …); None when nothing (known) was picked."""
        if self.kind == "boolean":
            return True if self.YES in codes else False if self.NO in codes else None
        count = len(self.options)
        values = [
            self.options[int(c)][0] for c in codes if isinstance(c, str) and c.isdigit() and int(c) < count
        ]
        if self.kind == "choices":
            return values or None
        return values[0] if values else None

    def shown(self, value: FieldValue | list[str]) -> str:
        """A value as people read it: labels for choices, yes/no for booleans, numbers as written."""
        labels = dict(self.options)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, tuple | list):
            return ", ".join(labels.get(item, item) for item in value)
        if isinstance(value, str):
            return labels.get(value, value)
        return plain(value)


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


def plain(number: float) -> str:
    """1.0 as "1", 2.5 as "2.5": numbers as people write them."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number)

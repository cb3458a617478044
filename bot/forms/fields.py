"""A form's fields as every surface shows them, and the errors reading or filling one raise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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

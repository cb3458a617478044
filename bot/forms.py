"""Forms a server asks people to fill in (MCP elicitation, form mode): the schema read into fields.

A server sends a restricted JSON Schema (a flat object of primitive properties). Front ends show
fields, never schemas: this module reads the schema once into `FormField`s that every surface
renders its own way, and checks what people typed against the same fields, so Slack, Discord and
the terminal accept and refuse exactly the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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

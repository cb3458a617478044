"""Forms a server asks people to fill in (MCP elicitation, form mode): the schema read into fields.

A server sends a restricted JSON Schema (a flat object of primitive properties). Front ends show
fields, never schemas: this module reads the schema once into `FormField`s that every surface
renders its own way, and checks what people typed against the same fields, so every front
end accepts and refuses exactly the same answers.

Defaults: `parse_field` (one typed answer, the terminal) takes a field's default for empty text;
`check_answer` (a whole submitted form) takes only what was sent, because surfaces that show a
form pre-fill the defaults and a field the person emptied is one they chose to leave empty.
"""

from bot.forms.answers import check_answer, parse_field
from bot.forms.fields import REQUIRED, FieldError, FieldKind, FieldValue, Form, FormError, FormField
from bot.forms.hints import describe_field
from bot.forms.schema import form_from_schema, secret_fields

__all__ = [
    "REQUIRED",
    "FieldError",
    "FieldKind",
    "FieldValue",
    "Form",
    "FormError",
    "FormField",
    "check_answer",
    "describe_field",
    "form_from_schema",
    "parse_field",
    "secret_fields",
]

"""Forms a server asks people to fill in (MCP elicitation, form mode): the schema read into fields.

Front ends show fields, never schemas, and check answers against the same fields, so every front end
accepts and refuses the same answers. `parse_field` takes a field's default for empty text;
`check_answer` does not, since surfaces pre-fill defaults and an emptied field was left empty on purpose.
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

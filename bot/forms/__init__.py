"""Forms a server asks people to fill in (MCP elicitation, form mode): the schema read into fields.

Front ends show fields, never schemas, and check answers against the same fields, so every front end
accepts and refuses the same answers. `parse_field` takes a field's default for empty text;
`check_answer` does not, since surfaces pre-fill defaults and an emptied field was left empty on purpose.
"""

from bot.forms.answers import check_answer as check_answer
from bot.forms.answers import parse_field as parse_field
from bot.forms.fields import REQUIRED as REQUIRED
from bot.forms.fields import FieldError as FieldError
from bot.forms.fields import FieldValue as FieldValue
from bot.forms.fields import Form as Form
from bot.forms.fields import FormError as FormError
from bot.forms.fields import FormField as FormField
from bot.forms.hints import describe_field as describe_field
from bot.forms.schema import form_from_schema as form_from_schema
from bot.forms.schema import secret_fields as secret_fields

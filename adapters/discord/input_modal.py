"""A server's form on Discord as modals of at most five fields, a step each (`input_flow` checks each
step and chains them): text-like fields are text inputs with the hint as placeholder and the default
(or what was typed) pre-filled; choices and yes/no are selects, typed when there are too many options.
Option values are positions in the field's options, so any value a server uses fits Discord.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import discord

from adapters.discord.delivery import landed, tell
from adapters.discord.render import MESSAGE_LIMIT
from bot.text import truncate
from bot.types import FieldValue, Form, FormField, InputRequest, describe_field

logger = logging.getLogger(__name__)

FIELDS_PER_STEP = 5
TITLE_LIMIT = 45
LABEL_LIMIT = 45
DESCRIPTION_LIMIT = 100
PLACEHOLDER_LIMIT = 100
TEXT_LIMIT = 4000
OPTIONS_LIMIT = 25
OPTION_LABEL_LIMIT = 100
# A text field allowing more than this many characters gets a multi-line box.
PARAGRAPH_FROM = 300
# An unsubmitted modal is forgotten after this long (seconds).
MODAL_TIMEOUT = 3600.0

FAILED = "Sorry — something went wrong on my side with this form. Please try again."

# What one field gives: text typed, several option values, yes/no, or (a select left empty) None.
Raw = str | bool | list[str] | None


def steps_of(form: Form, per_step: int = FIELDS_PER_STEP) -> list[tuple[int, ...]]:
    count = len(form.fields)
    return [tuple(range(start, min(start + per_step, count))) for start in range(0, count, per_step)]


# --- one field --------------------------------------------------------------------------------------


def _select(
    index: int, form_field: FormField, value: Raw | FieldValue | None, placeholder: str
) -> discord.ui.Select[Any]:
    # The options (their codes) `value` picks: a yes/no field's value is True, False or left empty.
    if form_field.kind == "boolean":
        pairs = [(form_field.YES, "Yes"), (form_field.NO, "No")]
        chosen = {form_field.YES if value else form_field.NO} if isinstance(value, bool) else set()
    else:
        pairs = [(str(i), label) for i, (_, label) in enumerate(form_field.options)]
        items = list(value) if isinstance(value, list | tuple) else [value]
        chosen = {str(i) for i, (option, _) in enumerate(form_field.options) if option in items}
    options = [
        discord.SelectOption(
            label=truncate(label, OPTION_LABEL_LIMIT)[0] or "(empty)", value=code, default=code in chosen
        )
        for code, label in pairs
    ]
    choices = form_field.kind == "choices"
    most = max(1, min(len(options), form_field.max_items or len(options))) if choices else 1
    least = min(max(1, form_field.min_items or 1), most) if form_field.required else 0
    return discord.ui.Select(
        custom_id=f"f{index}",
        placeholder=placeholder,
        min_values=least,
        max_values=most,
        options=options,
        required=form_field.required,
    )


def _text_input(
    index: int, form_field: FormField, value: Raw | FieldValue | None, placeholder: str
) -> discord.ui.TextInput[Any]:
    longest = TEXT_LIMIT
    shortest: int | None = None
    long_text = False
    if form_field.kind == "text":
        if form_field.max_length is not None:
            longest = max(1, min(form_field.max_length, TEXT_LIMIT))
            long_text = form_field.max_length > PARAGRAPH_FROM
        if form_field.min_length and form_field.required:
            shortest = min(form_field.min_length, longest)
    default = form_field.shown(value) if value is not None else None
    return discord.ui.TextInput(
        custom_id=f"f{index}",
        style=discord.TextStyle.paragraph if long_text else discord.TextStyle.short,
        placeholder=placeholder,
        default=default[:longest] if default else None,
        required=form_field.required,
        min_length=shortest,
        max_length=longest,
    )


def field_item(index: int, form_field: FormField, value: Raw | FieldValue | None) -> discord.ui.Label[Any]:
    """One field as a labelled input; `value` is what to pre-fill (None: nothing)."""
    placeholder = truncate(describe_field(form_field), PLACEHOLDER_LIMIT)[0]
    # Choices past what a select holds are typed instead.
    few = form_field.kind in ("choice", "choices") and 0 < len(form_field.options) <= OPTIONS_LIMIT
    component: discord.ui.Item[Any] = (
        _select(index, form_field, value, placeholder)
        if few or form_field.kind == "boolean"
        else _text_input(index, form_field, value, placeholder)
    )
    description = truncate(" ".join(form_field.description.split()), DESCRIPTION_LIMIT)[0]
    return discord.ui.Label(
        text=truncate(form_field.title, LABEL_LIMIT)[0] or form_field.name[:LABEL_LIMIT] or "Answer",
        description=description or None,
        component=component,
    )


def read_item(form_field: FormField, component: discord.ui.Item[Any]) -> Raw:
    """What the person gave in one field: "" or None when they left it empty."""
    if isinstance(component, discord.ui.Select):
        return form_field.picked([str(code) for code in component.values])
    return component.value if isinstance(component, discord.ui.TextInput) else None


# --- the modal --------------------------------------------------------------------------------------

Submitted = Callable[[discord.Interaction[Any], InputRequest, int, dict[str, Raw]], Awaitable[None]]


class InputModal(discord.ui.Modal):
    """One step of a request's form; its submit goes to `submitted` with the step's values."""

    def __init__(
        self,
        *,
        request: InputRequest,
        step: int,
        steps: list[tuple[int, ...]],
        values: Mapping[str, Raw],
        boot: str,
        submitted: Submitted,
    ) -> None:
        suffix = f" ({step}/{len(steps)})" if len(steps) > 1 else ""
        base = " ".join(request.message.split()) or f"{request.server} asks"
        super().__init__(
            title=truncate(base, TITLE_LIMIT - len(suffix))[0] + suffix,
            custom_id=f"nerve:in:m:{request.request_id}:{step}:{boot}",
            timeout=MODAL_TIMEOUT,
        )
        assert request.form is not None
        self.request = request
        self.step = step
        self._submitted = submitted
        self._inputs: list[tuple[FormField, discord.ui.Item[Any]]] = []
        for index in steps[step - 1]:
            form_field = request.form.fields[index]
            label = field_item(index, form_field, values.get(form_field.name, form_field.default))

            self._inputs.append((form_field, label.component))
            self.add_item(label)

    async def on_submit(self, interaction: discord.Interaction[Any], /) -> None:
        raw = {form_field.name: read_item(form_field, item) for form_field, item in self._inputs}
        await self._submitted(interaction, self.request, self.step, raw)

    async def on_error(  # type: ignore[override]  # discord.py's Modal takes no item
        self, interaction: discord.Interaction[Any], error: Exception, /
    ) -> None:
        logger.error("handling the form of input request %s failed", self.request.request_id, exc_info=error)
        await say(interaction, FAILED)


# --- answering -------------------------------------------------------------------------------------


async def say(interaction: discord.Interaction[Any], text: str, view: discord.ui.View | None = None) -> None:
    """An ephemeral message to the person who clicked or submitted (only they see it)."""
    sent = tell(interaction, truncate(text, MESSAGE_LIMIT)[0], view)
    await landed(sent, "could not answer interaction %s", interaction.id)

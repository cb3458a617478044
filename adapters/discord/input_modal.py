"""The form of a server's request on Discord: "Fill in" opens it as modals, five fields at a time.

A Discord modal holds at most five top-level components, so a longer form is filled in steps: each
step is one modal of up to five fields. Its submit checks those fields with the shared validator
(`bot.forms.check_answer`, the rules every surface uses) and answers, seen only by that person,
"Step 1 of 3 done" with a "Continue" button that opens the next step (Discord opens a modal only in
answer to a click, never right after another modal). The last submit sends the whole form to the
core (`Agent.answer_input`). Whatever is wrong comes back as a message, again only for that
person, listing each field's problem with a "Fix" button that reopens the step with what they
typed.

What was typed in earlier steps is kept in this process's memory, per request and person: a
restart mid-form loses it, and the person fills the form in again (the core ends a request whose
process stopped; a form opened before the restart says so when it is submitted).

Fields: text, email, link, date, date and time and numbers are text inputs with the field's hint
as placeholder and its default (or what was typed) pre-filled; one choice, several choices and
yes/no are selects. Every field sits in a `Label` (its title, and its description below it). A
choice with more options than a select holds is typed instead (the validator also reads labels).
Option values are positions in the field's options, so any value a server uses fits Discord.

Discord has no event for a modal closed without submitting: a request left alone expires in the
core, which tells the server "cancel".

A question a server asked in its call's result parks the turn (as an approval does): the answer
that leaves nothing more to wait for (`InputOutcome.resume`) lets the turn go on, in the background
once the click or submit is answered, through `resume` — the same path as the last approval click.
Such a question outlives a restart, so its message is also updated from the click or submit that
answered it, when this process did not post it, or from where its request says it was posted (an
expiry the sweep found).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import discord

from adapters.common.settle import ended
from adapters.discord.delivery import NO_MENTIONS
from adapters.discord.input_message import (
    InputBoard,
    InputButton,
    InputClick,
    Where,
    button_view,
    link_text,
    plain,
    request_message_at,
    settled_text,
)
from adapters.discord.render import MESSAGE_LIMIT
from bot.asks.inputs import EXPIRED, GONE
from bot.forms import Form, FormField, check_answer, describe_field
from bot.text.render import truncate
from bot.types import InputAnswer, InputOutcome, InputRequest, Progress, TurnEvent

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
MAX_DRAFTS = 1000
MODAL_TEMPLATE = re.compile(
    r"nerve:in:m:(?P<request>[A-Za-z0-9_-]{1,24}):(?P<step>[0-9]{1,2}):(?P<boot>[0-9a-f]{8})"
)
_YES, _NO = "yes", "no"

NO_FORM = "There is nothing to fill in for this request."
NOT_A_LINK = "This request has no link to open."
RESTARTED = (
    "nerve restarted while you were filling this in, so what you typed was lost. Please fill it in again."
)
FAILED = "Sorry — something went wrong on my side with this form. Please try again."

# What one field gives: text typed, several option values, or yes/no.
Raw = str | bool | list[str]


def steps_of(form: Form, per_step: int = FIELDS_PER_STEP) -> list[tuple[int, ...]]:
    """The fields' positions, step by step (one modal each)."""
    count = len(form.fields)
    return [tuple(range(start, min(start + per_step, count))) for start in range(0, count, per_step)]


def modal_id(request_id: str, step: int, boot: str) -> str:
    return f"nerve:in:m:{request_id}:{step}:{boot}"


def modal_title(request: InputRequest, step: int, steps: int) -> str:
    suffix = f" ({step}/{steps})" if steps > 1 else ""
    base = " ".join(request.message.split()) or f"{request.server} asks"
    return truncate(base, TITLE_LIMIT - len(suffix))[0] + suffix


# --- one field --------------------------------------------------------------------------------------


def _is_select(form_field: FormField) -> bool:
    if form_field.kind == "boolean":
        return True
    return form_field.kind in ("choice", "choices") and 0 < len(form_field.options) <= OPTIONS_LIMIT


def _as_text(form_field: FormField, value: object) -> str | None:
    """A value as text to pre-fill: numbers as people write them, choices by their labels."""
    if value is None:
        return None
    if isinstance(value, bool):
        return _YES if value else _NO
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        labels = dict(form_field.options)
        return ", ".join(labels.get(str(item), str(item)) for item in value)
    if form_field.kind == "choice":
        return dict(form_field.options).get(str(value), str(value))
    return str(value)


def _chosen(form_field: FormField, value: object) -> set[str]:
    """The select options (their codes) a value picks."""
    if form_field.kind == "boolean":
        word = str(value).lower() if isinstance(value, str) else value
        if word is True or word in (_YES, "true"):
            return {_YES}
        if word is False or word in (_NO, "false"):
            return {_NO}
        return set()
    items = list(value) if isinstance(value, list | tuple) else [value] if isinstance(value, str) else []
    return {str(i) for i, (option, _) in enumerate(form_field.options) if option in items}


def _select(index: int, form_field: FormField, value: object, placeholder: str) -> discord.ui.Select[Any]:
    if form_field.kind == "boolean":
        pairs = [(_YES, "Yes"), (_NO, "No")]
    else:
        pairs = [(str(i), label) for i, (_, label) in enumerate(form_field.options)]
    chosen = _chosen(form_field, value)
    options = [
        discord.SelectOption(
            label=truncate(label, OPTION_LABEL_LIMIT)[0] or "(empty)", value=code, default=code in chosen
        )
        for code, label in pairs
    ]
    most = 1
    least = 1 if form_field.required else 0
    if form_field.kind == "choices":
        most = max(1, min(len(options), form_field.max_items or len(options)))
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
    index: int, form_field: FormField, value: object, placeholder: str
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
    default = _as_text(form_field, value)
    return discord.ui.TextInput(
        custom_id=f"f{index}",
        style=discord.TextStyle.paragraph if long_text else discord.TextStyle.short,
        placeholder=placeholder,
        default=default[:longest] if default else None,
        required=form_field.required,
        min_length=shortest,
        max_length=longest,
    )


def field_item(index: int, form_field: FormField, value: object) -> discord.ui.Label[Any]:
    """One field as a labelled input; `value` is what to pre-fill (None: nothing)."""
    placeholder = truncate(describe_field(form_field), PLACEHOLDER_LIMIT)[0]
    component: discord.ui.Item[Any] = (
        _select(index, form_field, value, placeholder)
        if _is_select(form_field)
        else _text_input(index, form_field, value, placeholder)
    )
    description = truncate(" ".join(form_field.description.split()), DESCRIPTION_LIMIT)[0]
    return discord.ui.Label(
        text=truncate(form_field.title, LABEL_LIMIT)[0] or form_field.name[:LABEL_LIMIT] or "Answer",
        description=description or None,
        component=component,
    )


def read_item(form_field: FormField, component: discord.ui.Item[Any]) -> Raw:
    """What the person gave in one field: "" (or an empty list) when they left it empty."""
    if isinstance(component, discord.ui.TextInput):
        return component.value
    if not isinstance(component, discord.ui.Select):
        return ""
    codes = [str(code) for code in component.values]
    if form_field.kind == "boolean":
        return True if _YES in codes else False if _NO in codes else ""
    picked = [
        form_field.options[int(code)][0]
        for code in codes
        if code.isdigit() and int(code) < len(form_field.options)
    ]
    if form_field.kind == "choices":
        return picked
    return picked[0] if picked else ""


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
        super().__init__(
            title=modal_title(request, step, len(steps)),
            custom_id=modal_id(request.request_id, step, boot),
            timeout=MODAL_TIMEOUT,
        )
        assert request.form is not None
        self.request = request
        self.step = step
        self._submitted = submitted
        self._inputs: list[tuple[FormField, discord.ui.Item[Any]]] = []
        for index in steps[step - 1]:
            form_field = request.form.fields[index]
            value: object = values.get(form_field.name, form_field.default)
            label = field_item(index, form_field, value)
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
    extra: dict[str, Any] = {"view": view} if view is not None else {}
    content = truncate(text, MESSAGE_LIMIT)[0]
    try:
        if interaction.response.is_done():
            await interaction.followup.send(content, ephemeral=True, allowed_mentions=NO_MENTIONS, **extra)
        else:
            await interaction.response.send_message(
                content, ephemeral=True, allowed_mentions=NO_MENTIONS, **extra
            )
    except discord.HTTPException as exc:
        logger.warning("could not answer interaction %s: %s %s", interaction.id, exc.status, exc.text)


def errors_text(form: Form, errors: Mapping[str, str]) -> str:
    """Each wrong field's problem, in the form's order."""
    lines = ["Some answers need fixing:"]
    for form_field in form.fields:
        if form_field.name in errors:
            lines.append(f"• **{plain(form_field.title, 100)}**: {plain(errors[form_field.name], 400)}")
    lines.append("-# **Fix** reopens the form with what you typed.")
    return "\n".join(lines)


class InputAgent(Protocol):
    """What the form needs from the core `Agent`."""

    async def open_input(self, request_id: str, user_id: str) -> InputOutcome: ...

    async def answer_input(self, request_id: str, user_id: str, answer: InputAnswer) -> InputOutcome: ...

    async def input_posted(self, request_id: str, ref: str) -> None: ...


@dataclass(slots=True)
class Draft:
    """What one person gave so far in a request's form, the steps that passed the check, and where
    the request's message is (channel id, message id) once its "Fill in" was clicked."""

    values: dict[str, Raw] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    message: tuple[int, int] | None = None


class InputFlow:
    """The requests of one Discord client: their messages, clicks, forms and answers.

    `resume` goes on with a parked turn an answer let go on (without waiting for it); `sweep` looks
    for expired requests now, so a click on an expired question shows its turn going on at once.
    """

    def __init__(
        self,
        *,
        agent: InputAgent,
        board: InputBoard,
        resume: Callable[[str], None] = lambda request_id: None,
        sweep: Callable[[], None] = lambda: None,
        per_step: int = FIELDS_PER_STEP,
    ) -> None:
        self._agent = agent
        self._board = board
        self._resume = resume
        self._sweep = sweep
        self._per_step = per_step
        # Marks the modals this client opened: a submit of another one comes from before a restart.
        self.boot = secrets.token_hex(4)
        self._drafts: OrderedDict[tuple[str, str], Draft] = OrderedDict()

    # --- the turn's events ---------------------------------------------------------------------------

    def sink(self, forward: Progress, where: Where) -> Progress:
        """The turn's progress sink: requests are shown `where` the turn runs, the rest goes on."""

        async def progress(event: TurnEvent) -> None:
            request = event.input
            if request is not None and event.kind == "input_needed":
                self._board.show(request, where, self._agent.input_posted)
            elif request is not None and event.kind == "input_done":
                self._board.settle(request, event.message)
                self._forget(request.request_id)
            await forward(event)

        return progress

    # --- clicks --------------------------------------------------------------------------------------

    async def clicked(self, interaction: discord.Interaction[Any], click: InputClick) -> None:
        user = str(interaction.user.id)
        if click.action == "decline":
            refused = await self._decline(interaction, click.request_id, user)
        elif click.action == "open":
            refused = await self._open_link(interaction, click.request_id, user)
        else:
            refused = await self._open_form(interaction, click.request_id, user, click.step)
        if refused is not None and click.action != "step":
            await self._tidy(interaction, refused)
        if refused is not None and refused.note == EXPIRED:
            self._sweep()

    def _answered(self, request_id: str, outcome: InputOutcome, at: tuple[int, int] | None) -> None:
        """An answer the core took: the request's message says so (`at`, when this process did not
        post it), and a parked turn it let go on goes on. Nothing here awaits, so the message shows
        the answer before anything the server does next (a link it reports done)."""
        self._forget(request_id)
        if outcome.request is not None and outcome.status is not None:
            self._board.settle(outcome.request, outcome.status, at)
        if outcome.resume is not None:
            self._resume(outcome.resume)

    async def _tidy(self, interaction: discord.Interaction[Any], refused: InputOutcome) -> None:
        """A click on a request that is over (one from before a restart, say): its message loses its
        buttons and says how it ended, as it would have here."""
        status = ended(refused)
        message = interaction.message
        if status is None or refused.request is None or message is None:
            return
        try:
            await message.edit(
                content=settled_text(refused.request, status), view=None, allowed_mentions=NO_MENTIONS
            )
        except discord.HTTPException as exc:
            logger.info("could not update the message of a finished request: %s %s", exc.status, exc.text)

    async def _open_form(
        self, interaction: discord.Interaction[Any], request_id: str, user: str, step: int
    ) -> InputOutcome | None:
        """Answer the click with the step's modal (it must be the click's first response); the
        outcome when the core said why not."""
        outcome = await self._agent.open_input(request_id, user)
        request = outcome.request
        if outcome.note is not None or request is None or request.form is None:
            await say(interaction, outcome.note or NO_FORM)
            return outcome
        steps = steps_of(request.form, self._per_step)
        at = request_message_at(interaction.message, request_id)
        if at is not None:
            self._draft(request_id, user).message = at
        draft = self._drafts.get((request_id, user))
        done = draft.done if draft is not None else set()
        # A later step needs the earlier ones' answers: start from the first one missing.
        step = next((s for s in range(1, step) if s not in done), min(max(1, step), len(steps)))
        modal = InputModal(
            request=request,
            step=step,
            steps=steps,
            values=draft.values if draft is not None else {},
            boot=self.boot,
            submitted=self._submitted,
        )
        try:
            await interaction.response.send_modal(modal)
        except discord.HTTPException as exc:
            logger.warning(
                "could not open the form of input request %s: %s %s", request_id, exc.status, exc.text
            )
        return None

    async def _decline(
        self, interaction: discord.Interaction[Any], request_id: str, user: str
    ) -> InputOutcome | None:
        if not await _acknowledge(interaction):
            return None
        outcome = await self._agent.answer_input(request_id, user, InputAnswer(action="decline"))
        if outcome.changed:
            self._answered(request_id, outcome, request_message_at(interaction.message, request_id))
            return None
        await say(interaction, outcome.note or GONE)
        return outcome

    async def _open_link(
        self, interaction: discord.Interaction[Any], request_id: str, user: str
    ) -> InputOutcome | None:
        """URL mode: the asker agrees to open the link; only then do they get it."""
        if not await _acknowledge(interaction):
            return None
        opened = await self._agent.open_input(request_id, user)
        request = opened.request
        if opened.note is not None or request is None or request.mode != "url" or not request.url:
            await say(interaction, opened.note or NOT_A_LINK)
            return opened
        outcome = await self._agent.answer_input(request_id, user, InputAnswer(action="accept"))
        if not outcome.changed:
            await say(interaction, outcome.note or GONE)
            return outcome
        self._answered(request_id, outcome, request_message_at(interaction.message, request_id))
        text, view = link_text(request.url)
        await say(interaction, text, view)
        return None

    # --- submits -------------------------------------------------------------------------------------

    async def _submitted(
        self, interaction: discord.Interaction[Any], request: InputRequest, step: int, raw: dict[str, Raw]
    ) -> None:
        """One step's values: check them; then the next step, or the whole form to the core."""
        assert request.form is not None
        form = request.form
        steps = steps_of(form, self._per_step)
        user = str(interaction.user.id)
        draft = self._draft(request.request_id, user)
        draft.values.update(raw)
        shown = Form(fields=tuple(form.fields[i] for i in steps[step - 1]))
        _, errors = check_answer(shown, raw)
        if errors:
            draft.done.discard(step)
            await say(interaction, errors_text(form, errors), self._step_view(request, step, "Fix"))
            return
        draft.done.add(step)
        missing = [s for s in range(1, len(steps) + 1) if s not in draft.done]
        if missing:
            view = self._step_view(request, missing[0], "Continue")
            await say(interaction, f"✅ Step {step} of {len(steps)} done.", view)
            return
        if not await _acknowledge(interaction):
            return
        answer = InputAnswer(action="accept", content=dict(draft.values))
        outcome = await self._agent.answer_input(request.request_id, user, answer)
        if outcome.errors:
            wrong = {
                s
                for s, indexes in enumerate(steps, start=1)
                for i in indexes
                if form.fields[i].name in outcome.errors
            }
            draft.done -= wrong
            first = min(wrong, default=1)
            await say(interaction, errors_text(form, outcome.errors), self._step_view(request, first, "Fix"))
            return
        if not outcome.changed:
            self._forget(request.request_id)
            await say(interaction, outcome.note or GONE)
            return
        at = request_message_at(interaction.message, request.request_id) or draft.message
        self._answered(request.request_id, outcome, at)

    async def stale_submit(self, interaction: discord.Interaction[Any]) -> None:
        """A form opened before a restart was submitted: nothing here knows it, so say what to do."""
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        data: Mapping[str, Any] = interaction.data or {}
        match = MODAL_TEMPLATE.fullmatch(str(data.get("custom_id") or ""))
        if match is None or match["boot"] == self.boot:
            return
        request_id = match["request"]
        outcome = await self._agent.open_input(request_id, str(interaction.user.id))
        if outcome.note is not None:
            await say(interaction, outcome.note)
            return
        fill = InputButton(
            InputClick(action="fill", request_id=request_id),
            label="Fill in",
            style=discord.ButtonStyle.primary,
        )
        await say(interaction, RESTARTED, button_view(fill))

    # --- drafts --------------------------------------------------------------------------------------

    def _step_view(self, request: InputRequest, step: int, label: str) -> discord.ui.View:
        click = InputClick(action="step", request_id=request.request_id, step=step)
        return button_view(InputButton(click, label=label, style=discord.ButtonStyle.primary))

    def _draft(self, request_id: str, user: str) -> Draft:
        key = (request_id, user)
        draft = self._drafts.get(key)
        if draft is None:
            draft = self._drafts[key] = Draft()
            while len(self._drafts) > MAX_DRAFTS:
                self._drafts.popitem(last=False)
        self._drafts.move_to_end(key)
        return draft

    def _forget(self, request_id: str) -> None:
        for key in [k for k in self._drafts if k[0] == request_id]:
            del self._drafts[key]


async def _acknowledge(interaction: discord.Interaction[Any]) -> bool:
    """Acknowledge at once (Discord's 3 seconds) before asking the core; False if that failed."""
    try:
        await interaction.response.defer()
    except discord.HTTPException as exc:
        logger.warning("could not acknowledge interaction %s: %s %s", interaction.id, exc.status, exc.text)
        return False
    return True

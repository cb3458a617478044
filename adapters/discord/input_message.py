"""A server's request for input on Discord: the message in the conversation, its buttons and its form.

The message says which server asks, for which call, what, who may answer and until when, with
"Fill in" (form) or "Open" (URL) and "Decline"; a link's host is shown large on a line of its own,
so nobody opens it without seeing where it leads. "Open" is a button, not a link button: Discord
tells nobody when a link button is clicked, and the server must learn that its person agreed. A
request nerve refused to show is a note without buttons. Buttons carry their request id (clicks work
after a restart); once the request ends its message, stored with the request so any process can
edit it, loses them and says how it ended. Everything a server wrote is escaped.

The form is shown as modals of at most five fields, a step each (`input_flow` checks and chains
them): text-like fields are text inputs with the hint as placeholder and the default (or what was
typed) pre-filled, choices and yes/no are selects (typed when there are too many options). Option
values are positions in the field's options, so any value a server uses fits Discord.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import discord

from adapters.common import cards
from adapters.common.refs import message_ref
from adapters.common.settle import Settled
from adapters.common.tasks import Spawn
from adapters.discord.approvals import parse_message_ref, person
from adapters.discord.delivery import NO_MENTIONS, ChannelGuard, ClickButton, landed, send_message, tell
from adapters.discord.render import MESSAGE_LIMIT
from adapters.resources import link_host
from bot.text import truncate
from bot.types import Form, FormField, InputRequest, describe_field

logger = logging.getLogger(__name__)

InputAction = Literal["fill", "decline", "open", "step"]
_CODES: dict[InputAction, str] = {"fill": "f", "decline": "d", "open": "o", "step": "s"}
_ACTIONS: dict[str, InputAction] = {code: action for action, code in _CODES.items()}
TEMPLATE = r"nerve:in:(?P<action>[fdos]):(?P<request>[A-Za-z0-9_-]{1,24})(?::(?P<step>[0-9]{1,2}))?"
CUSTOM_ID_LIMIT = 100
LABEL_LIMIT = 80
# Discord's limit for a link button's url; a longer link is shown as text to copy.
LINK_URL_LIMIT = 512
MESSAGE_TEXT_LIMIT = 1200
# Requests whose message may still change, remembered at most (the oldest are forgotten first).
KEPT_REQUESTS = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class InputClick:
    """What a clicked button asks for, read back from its custom_id; `step` counts from 1."""

    action: InputAction
    request_id: str
    step: int = 1


def custom_id(click: InputClick) -> str:
    made = f"nerve:in:{_CODES[click.action]}:{click.request_id}"
    if click.action == "step":
        made += f":{click.step}"
    if len(made) > CUSTOM_ID_LIMIT or not re.fullmatch(TEMPLATE, made):
        raise ValueError(f"input request id {click.request_id!r} does not fit in a Discord custom_id")
    return made


def parse(match: re.Match[str]) -> InputClick:
    step = match["step"]
    return InputClick(
        action=_ACTIONS[match["action"]], request_id=match["request"], step=int(step) if step else 1
    )


class InputButton(ClickButton, template=TEMPLATE):
    """One button of a request (or of the steps of its form); its click goes to the `InputFlow`."""

    route = "input_flow"
    click_id, read = staticmethod(custom_id), staticmethod(parse)


def request_message_at(message: discord.Message | None, request_id: str) -> tuple[int, int] | None:
    """Where the request's own message is (channel id, message id) when `message` is it: the one
    carrying the request's Decline, not a step's or a note's message seen only by its person."""
    if message is None:
        return None
    decline = custom_id(InputClick(action="decline", request_id=request_id))
    for row in message.components:
        for item in getattr(row, "children", ()):
            if getattr(item, "custom_id", None) == decline:
                return message.channel.id, message.id
    return None


def button_view(request_id: str, *buttons: tuple[InputAction, str], step: int = 1) -> discord.ui.View:
    """A request's buttons, each (action, label): "Decline" red, the others blue."""
    view = discord.ui.View(timeout=None)
    for action, label in buttons:
        style = discord.ButtonStyle.danger if action == "decline" else discord.ButtonStyle.primary
        click = InputClick(action=action, request_id=request_id, step=step)
        view.add_item(InputButton(click, label=label, style=style))
    return view


# --- what it says ----------------------------------------------------------------------------------


def plain(text: str, limit: int) -> str:
    """Server text as inert Markdown: no formatting, no mentions, at most `limit` characters."""
    escaped = discord.utils.escape_mentions(discord.utils.escape_markdown(text))
    return truncate(escaped, limit)[0]


def code(text: str, limit: int = 100) -> str:
    """Inline code that no backtick in `text` can close early."""
    return "`" + truncate(text.replace("`", "ˋ"), limit)[0] + "`"


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in plain(text.strip(), MESSAGE_TEXT_LIMIT).splitlines())


def _headline(request: InputRequest) -> str:
    line = cards.asks(request)
    tools = ", ".join(code(tool, 80) for tool in request.tools[:5]) or "a tool call"
    return f"{line.icon} **{code(request.server, 80)} {line.words}** (for {tools})"


def _body(request: InputRequest) -> list[str]:
    """What the server asked, the same before and after it was answered."""
    lines = [_headline(request)]
    if request.refused is not None:
        lines.append(f"-# {plain(request.refused, 600)}")
        return lines
    if request.mode == "url" and request.url:
        lines += ["The link goes to", f"## {code(link_host(request.url), 300)}"]
        if request.message.strip():
            lines += ["Why, as the server says:", _quoted(request.message)]
    elif request.message.strip():
        lines.append(_quoted(request.message))
    return lines


def request_text(request: InputRequest, *, per_step: int = 5) -> str:
    """The message's content while the request waits for its person."""
    lines = _body(request)
    if request.refused is None:
        verb = "open the link or decline" if request.mode == "url" else "answer"
        who = f"Only {person(request.user_id)} (who asked) can {verb}."
        if request.expires_at:
            who += f" Expires <t:{int(request.expires_at)}:R>."
        lines.append(who)
        count = len(request.form.fields) if request.form is not None else 0
        if count > per_step:
            lines.append(f"-# {count} fields: the form opens in {-(-count // per_step)} steps.")
    return truncate("\n".join(lines), MESSAGE_LIMIT)[0]


def request_view(request: InputRequest) -> discord.ui.View | None:
    """The request's buttons; None for a request nerve refused to show."""
    if request.refused is not None:
        return None
    host = truncate(link_host(request.url or ""), 60)[0]
    first: tuple[InputAction, str] = (
        ("open", f"Open {host}") if request.mode == "url" else ("fill", "Fill in")
    )
    return button_view(request.request_id, first, ("decline", "Decline"))


def settled_text(request: InputRequest, status: str) -> str:
    """The message's content once the request is over (its buttons are taken off)."""
    said = cards.ended(request, status)
    line = said.say(stress=lambda words: f"**{words}**") if said is not None else plain(status, 200)
    return truncate("\n".join([*_body(request), line]), MESSAGE_LIMIT)[0]


def link_text(url: str) -> tuple[str, discord.ui.View | None]:
    """What the asker alone sees after "Open": the host again and a link button (or the link as
    text to copy when Discord's buttons cannot hold it)."""
    host = link_host(url)
    if len(url) <= LINK_URL_LIMIT:
        view = discord.ui.View(timeout=None)
        view.add_item(
            discord.ui.Button(
                style=discord.ButtonStyle.link, url=url, label=truncate(f"Open {host}", LABEL_LIMIT)[0]
            )
        )
        return f"The link goes to **{code(host, 300)}**. Open it to go on:", view
    shown = truncate(url.replace("`", "%60"), MESSAGE_LIMIT - 200)[0]
    return f"The link goes to **{code(host, 300)}**. Copy it into your browser:\n```\n{shown}\n```", None


# --- posting it and keeping it up to date -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """Where a turn runs: the channel (or thread, or DM) its messages go to, replying to `reference`."""

    channel: discord.abc.Messageable
    channel_id: int
    reference: discord.MessageReference | None = None


# Stores where a request's message was posted (`Agent.ask_posted`): request id, message ref.
KeepRef = Callable[[str, str], Awaitable[None]]


class InputBoard:
    """Posts each request's message where its turn runs and edits it as the request ends, in tasks
    of their own (the progress sink never waits for Discord). A request's edits wait for its post
    and the edit before (`Settled`), so the newest outcome shows last, and the same one only once."""

    def __init__(
        self, client: discord.Client, *, guard: ChannelGuard, spawn: Spawn, per_step: int = 5
    ) -> None:
        self._client = client
        self._guard = guard
        self._spawn = spawn
        self._per_step = per_step
        self._settled = Settled(self._edit, parse_message_ref, limit=KEPT_REQUESTS)

    def show(self, request: InputRequest, where: Where, keep_ref: KeepRef | None = None) -> None:
        """Post the request's message (a refused request's note is final: nothing is kept for it)
        and store where it is with `keep_ref`, so any process can update it later."""
        if request.refused is None:
            self._settled.posting(request.request_id)
        else:
            keep_ref = None
        self._spawn(self._post(request, where, keep_ref), f"discord-input-{request.request_id}")

    async def _post(self, request: InputRequest, where: Where, keep_ref: KeepRef | None) -> None:
        message: discord.Message | None = None
        try:
            message = await send_message(
                where.channel,
                request_text(request, per_step=self._per_step),
                guard=self._guard,
                channel_id=where.channel_id,
                view=request_view(request),
                reference=where.reference,
            )
        finally:
            if request.refused is None:
                self._settled.posted(request.request_id, (where.channel_id, message.id) if message else None)
        if message is None:
            logger.warning("could not post the message of input request %s", request.request_id)
        elif keep_ref is not None:
            try:
                await keep_ref(request.request_id, message_ref(where.channel_id, message.id))
            except Exception:
                logger.exception("could not store where input request %s is shown", request.request_id)

    def settle(self, request: InputRequest, status: str, at: tuple[int, int] | None = None) -> None:
        """Take the buttons off the request's message and say how it ended; one this process did not
        post is edited where the click came from (`at`), else where its request says it is."""
        self._spawn(self._settle(request, status, at), f"discord-input-done-{request.request_id}")

    async def _settle(self, request: InputRequest, status: str, at: tuple[int, int] | None) -> None:
        await self._settled.settle(request, status, at)

    async def _edit(self, where: tuple[int, int], request: InputRequest, status: str) -> bool:
        channel_id, message_id = where
        partial = self._client.get_partial_messageable(channel_id).get_partial_message(message_id)
        edit = partial.edit(content=settled_text(request, status), view=None, allowed_mentions=NO_MENTIONS)
        return await landed(edit, "could not update the message of input request %s", request.request_id)


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
_YES, _NO = "yes", "no"

FAILED = "Sorry — something went wrong on my side with this form. Please try again."

# What one field gives: text typed, several option values, or yes/no.
Raw = str | bool | list[str]


def steps_of(form: Form, per_step: int = FIELDS_PER_STEP) -> list[tuple[int, ...]]:
    """The fields' positions, step by step (one modal each)."""
    count = len(form.fields)
    return [tuple(range(start, min(start + per_step, count))) for start in range(0, count, per_step)]


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
    try:
        await tell(interaction, truncate(text, MESSAGE_LIMIT)[0], view)
    except discord.HTTPException as exc:
        logger.warning("could not answer interaction %s: %s %s", interaction.id, exc.status, exc.text)

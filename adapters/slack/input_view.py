"""A server's request for input on Slack: the thread message with its buttons, and the form's modal.

A link's host is shown on its own line, so nobody opens it unseen; Slack opens it, nerve never
fetches it. Block ids and option values are positions in the form, since names and values may be
longer or stranger than Slack allows. Everything a server wrote is escaped.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from adapters.common import cards
from adapters.resources import link_host
from adapters.slack.approval_view import person
from adapters.slack.render import (
    SECTION_TEXT_LIMIT,
    OutMessage,
    context,
    escape_capped,
    quoted,
    section,
    when,
)
from bot.text import truncate
from bot.types import Form, FormField, InputRequest, describe_field

ACTION_PREFIX = "nerve_input"
# A button's action id is `nerve_input.<choice>.<request id>`; its value is the request id too.
ACTION_PATTERN = re.compile(rf"^{ACTION_PREFIX}\.")
CALLBACK_ID = "nerve_input"
InputChoice = Literal["fill", "decline", "open"]
_CHOICES: tuple[InputChoice, ...] = ("fill", "decline", "open")

# Slack's limits for modals and their elements.
TITLE_LIMIT = 24
BUTTON_TEXT_LIMIT = 24
MODAL_BLOCKS = 100
LABEL_LIMIT = 2_000
HINT_LIMIT = 2_000
OPTION_TEXT_LIMIT = 75
SELECT_OPTIONS = 100
TEXT_INPUT_LIMIT = 3_000
URL_BUTTON_LIMIT = 3_000
METADATA_LIMIT = 3_000
# A text field allowing more than this gets a multi-line box.
MULTILINE_FROM = 300

_TEXT_INPUTS = {"text": "plain_text_input", "email": "email_text_input", "uri": "url_text_input"}
_YES_NO = ((FormField.YES, "Yes"), (FormField.NO, "No"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModalPlace:
    """A modal's `private_metadata`: its request, the thread for notes, and the request's message."""

    request_id: str
    channel: str | None = None
    thread_ts: str | None = None
    message_ts: str | None = None


# --- small pieces ----------------------------------------------------------------------------------


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit)[0] or "…", "emoji": True}


def _tools(request: InputRequest) -> str:
    return ", ".join(f"`{escape_capped(tool, 150)}`" for tool in request.tools) or "a tool call"


def _button(text: str, choice: InputChoice, request_id: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": _plain(text, BUTTON_TEXT_LIMIT),
        "action_id": f"{ACTION_PREFIX}.{choice}.{request_id}",
        "value": request_id,
        "style": style,
    }


# --- the thread message ----------------------------------------------------------------------------


def _headline(request: InputRequest) -> str:
    line = cards.asks(request)
    return f"{line.icon} *`{escape_capped(request.server, 150)}` {line.words}*"


def _body(request: InputRequest) -> list[dict[str, Any]]:
    """What the server asked, the same before and after it was answered."""
    blocks = [section(_headline(request))]
    if request.refused is None and request.mode == "url" and request.url:
        blocks.append(section(f"The link goes to\n*{escape_capped(link_host(request.url), 500)}*"))
        if request.message:
            blocks.append(section("*Why, as the server says:*\n" + quoted(request.message)))
        if len(request.url) > URL_BUTTON_LIMIT:
            blocks.append(section(f"```{escape_capped(request.url, SECTION_TEXT_LIMIT - 10)}```"))
    elif request.message:
        blocks.append(section(quoted(request.message)))
    if request.refused is not None:
        blocks.append(context(escape_capped(request.refused, 2_000)))
    return blocks


def request_message(request: InputRequest) -> OutMessage:
    """The message posted in the thread when a server asks: the request and its buttons."""
    blocks = _body(request)
    server = request.server
    if request.refused is not None:
        text = f"{server} asked for input nerve does not show; declined"
        return OutMessage(text=escape_capped(text, 3_000), blocks=blocks)
    rid = request.request_id
    if request.mode == "url" and request.url:
        open_link = {**_button("Open", "open", rid, "primary"), "url": request.url}
        elements = [open_link] if len(request.url) <= URL_BUTTON_LIMIT else []
        elements.append(_button("Decline", "decline", rid, "danger"))
        text = f"{server} asks you to open a link to {link_host(request.url)}"
    else:
        elements = [_button("Fill in", "fill", rid, "primary"), _button("Decline", "decline", rid, "danger")]
        text = f"{server} asks for input"
    blocks.append({"type": "actions", "block_id": "nerve_input", "elements": elements})
    who = f"For {_tools(request)} · only {person(request.user_id)} (who asked) can answer"
    if request.expires_at:
        who += f" · expires {when(request.expires_at)}"
    blocks.append(context(who))
    return OutMessage(text=escape_capped(text, 3_000), blocks=blocks)


def settled_message(request: InputRequest, status: str) -> OutMessage:
    """The message once the request is over: no buttons, and how it ended."""
    line = escape_capped(cards.ended_words(request, status), 200)
    blocks = [*_body(request), context(f"{line} · {_tools(request)}")]
    return OutMessage(text=escape_capped(f"{request.server} asked for input: {line}", 3_000), blocks=blocks)


def parse_click(action: dict[str, Any]) -> tuple[InputChoice, str] | None:
    """The choice and request a request's button carries, or None when it is not one of ours."""
    parts = str(action.get("action_id") or "").split(".", 2)
    choice = next((c for c in _CHOICES if len(parts) == 3 and c == parts[1]), None)
    if choice is None or parts[0] != ACTION_PREFIX:
        return None
    value = action.get("value")
    request_id = value if isinstance(value, str) and value else parts[2]
    if not request_id:
        return None
    return choice, request_id


# --- the modal -------------------------------------------------------------------------------------


def block_id(index: int) -> str:
    return f"field.{index}"


def _option(index: int, label: str) -> dict[str, Any]:
    return {"text": _plain(label or "(empty)", OPTION_TEXT_LIMIT), "value": str(index)}


def _number(value: float, integer: bool, *, up: bool) -> str:
    if integer:
        return str(math.ceil(value) if up else math.floor(value))
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _element(field: FormField) -> tuple[dict[str, Any], str]:
    """The Block Kit element for one field, and what the hint adds about how it is shown."""
    default = field.default
    kind = field.kind
    element: dict[str, Any]
    note = ""
    if kind in ("text", "email", "uri"):
        element = {"type": _TEXT_INPUTS[kind]}
        longest = TEXT_INPUT_LIMIT
        if kind == "text":
            longest = min(field.max_length or TEXT_INPUT_LIMIT, TEXT_INPUT_LIMIT)
            if field.max_length is not None:
                element["max_length"] = max(1, longest)
            if field.min_length:
                element["min_length"] = min(field.min_length, longest)
            if field.max_length is not None and field.max_length > MULTILINE_FROM:
                element["multiline"] = True
        if isinstance(default, str) and default:
            element["initial_value"] = default[:longest]
    elif kind in ("number", "integer"):
        integer = kind == "integer"
        element = {"type": "number_input", "is_decimal_allowed": not integer}
        if field.minimum is not None:
            element["min_value"] = _number(field.minimum, integer, up=True)
        if field.maximum is not None:
            element["max_value"] = _number(field.maximum, integer, up=False)
        if isinstance(default, int | float) and not isinstance(default, bool):
            element["initial_value"] = _number(default, integer and float(default).is_integer(), up=True)
    # A default is a valid answer (`bot.forms` keeps no other): a YYYY-MM-DD date, a date-time with a zone.
    elif kind == "date":
        element = {"type": "datepicker"}
        if isinstance(default, str):
            element["initial_date"] = default
    elif kind == "date-time":
        element = {"type": "datetimepicker"}
        if isinstance(default, str):
            element["initial_date_time"] = int(datetime.fromisoformat(default).timestamp())
    elif kind == "boolean":
        # Yes/No radio buttons rather than one checkbox: a required yes-or-no question must be
        # answerable with "no" (Slack refuses a required checkbox left unticked), and an optional one
        # left alone stays unanswered instead of quietly becoming "no".
        yes, no = ({"text": _plain(label, 75), "value": code} for code, label in _YES_NO)
        element = {"type": "radio_buttons", "options": [yes, no]}
        if isinstance(default, bool):
            element["initial_option"] = yes if default else no
    else:  # choice, choices
        options = [_option(i, label or value) for i, (value, label) in enumerate(field.options)]
        shown = options[:SELECT_OPTIONS]
        if len(options) > SELECT_OPTIONS:
            note = f"Only the first {SELECT_OPTIONS} of {len(options)} options can be shown here."
        values = [value for value, _ in field.options][:SELECT_OPTIONS]
        picked = default if isinstance(default, tuple | list) else (default,)
        initial = [shown[values.index(v)] for v in dict.fromkeys(picked) if v in values]
        element = {"type": "static_select" if kind == "choice" else "multi_static_select", "options": shown}
        if initial and kind == "choice":
            element["initial_option"] = initial[0]
        elif initial:
            element["initial_options"] = initial
        if kind == "choices" and field.max_items is not None and field.max_items >= 1:
            element["max_selected_items"] = field.max_items
    element["action_id"] = "value"
    return element, note


def _input_block(index: int, field: FormField) -> dict[str, Any]:
    element, note = _element(field)
    hint = " · ".join(part for part in (field.description.strip(), describe_field(field), note) if part)
    return {
        "type": "input",
        "block_id": block_id(index),
        "label": _plain(field.title or field.name, LABEL_LIMIT),
        "element": element,
        "optional": not field.required,
        "hint": _plain(hint, HINT_LIMIT),
    }


def _metadata(place: ModalPlace) -> str:
    data = {"r": place.request_id, "c": place.channel, "t": place.thread_ts, "m": place.message_ts}
    raw = json.dumps({k: v for k, v in data.items() if v}, separators=(",", ":"))
    return raw if len(raw) <= METADATA_LIMIT else json.dumps({"r": place.request_id})


def read_place(metadata: Any) -> ModalPlace | None:
    """The request (and thread) a modal belongs to, from its `private_metadata`."""
    try:
        data = json.loads(str(metadata or ""))
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("r"), str) or not data["r"]:
        return None
    words = {key: value for key, value in data.items() if isinstance(value, str)}
    return ModalPlace(
        request_id=words["r"], channel=words.get("c"), thread_ts=words.get("t"), message_ts=words.get("m")
    )


def input_modal(request: InputRequest, place: ModalPlace) -> dict[str, Any]:
    """The modal for a form-mode request: the server's message, then one input per field."""
    fields = request.form.fields if request.form is not None else ()
    head = [
        section(_headline(request) + ("\n" + quoted(request.message) if request.message else "")),
        context(f"For {_tools(request)}"),
    ]
    room = MODAL_BLOCKS - len(head)
    shown = fields if len(fields) <= room else fields[: room - 1]
    blocks = head + [_input_block(i, f) for i, f in enumerate(shown)]
    if len(shown) < len(fields):
        blocks.append(context(f"_{len(fields) - len(shown)} more fields cannot be shown in Slack._"))
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "private_metadata": _metadata(place),
        "notify_on_close": True,
        "title": _plain(request.server, TITLE_LIMIT),
        "submit": _plain("Send", BUTTON_TEXT_LIMIT),
        "close": _plain("Cancel", BUTTON_TEXT_LIMIT),
        "blocks": blocks,
    }


# --- reading a submission --------------------------------------------------------------------------


def _read(form_field: FormField, state: dict[str, Any]) -> Any:
    """One field's submitted value as the shared validator takes it; None when left empty."""
    kind = form_field.kind
    if kind == "date":
        return state.get("selected_date") or None
    if kind == "date-time":
        stamp = state.get("selected_date_time")
        if not isinstance(stamp, int | float) or isinstance(stamp, bool):
            return None
        return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")
    if kind in ("boolean", "choice", "choices"):
        picked = state.get("selected_options") if kind == "choices" else [state.get("selected_option")]
        return form_field.picked([o.get("value") if isinstance(o, dict) else None for o in picked or []])
    value = state.get("value")
    return value if isinstance(value, str) and value != "" else None


def read_answer(form: Form, values: Any) -> dict[str, Any]:
    """A submitted modal's `view.state.values` by field name; fields left empty are left out."""
    content: dict[str, Any] = {}
    for index, form_field in enumerate(form.fields):
        actions = values.get(block_id(index)) if isinstance(values, dict) else None
        state = actions.get("value") if isinstance(actions, dict) else None
        value = _read(form_field, state) if isinstance(state, dict) else None
        if value is not None:
            content[form_field.name] = value
    return content


def error_blocks(form: Form, errors: dict[str, str], shown_blocks: list[dict[str, Any]]) -> dict[str, str]:
    """Errors by field name → by input block; one on a field not shown goes on the first, named."""

    names = {f.name: i for i, f in enumerate(form.fields)}
    shown = [str(b.get("block_id")) for b in shown_blocks if b.get("type") == "input"]
    out: dict[str, str] = {}
    for name, message in errors.items():
        index = names.get(name)
        block = block_id(index) if index is not None else None
        text = message
        if block not in shown:
            if not shown:
                continue
            block = shown[0]
            title = form.fields[index].title if index is not None else name
            text = f"{title}: {message}"
        out[block] = truncate(f"{out[block]} {text}" if block in out else text, 1_000)[0]
    return out


def first_input(blocks: list[dict[str, Any]]) -> str | None:
    """The block id of a modal's first input, where a note about the whole request is shown."""
    return next((str(block.get("block_id")) for block in blocks if block.get("type") == "input"), None)

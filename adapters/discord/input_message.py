"""A server's request for input on Discord: the message in the conversation, its buttons and its form.

A link's host is shown large on a line of its own, so nobody opens it without seeing where it leads.
"Open" is a button, not a link button: Discord tells nobody when a link button is clicked, and the
server must learn that its person agreed. Buttons carry their request id, so clicks work after a
restart. Everything a server wrote is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import discord

from adapters.common import cards
from adapters.discord.approvals import person
from adapters.discord.delivery import ClickButton, fitted, view_of
from adapters.discord.input_modal import FIELDS_PER_STEP
from adapters.discord.render import MESSAGE_LIMIT
from adapters.resources import link_host
from bot.text import truncate
from bot.types import InputRequest

InputAction = Literal["fill", "decline", "open", "step"]
_CODES: dict[InputAction, str] = {"fill": "f", "decline": "d", "open": "o", "step": "s"}
_ACTIONS: dict[str, InputAction] = {code: action for action, code in _CODES.items()}
TEMPLATE = r"nerve:in:(?P<action>[fdos]):(?P<request>[A-Za-z0-9_-]{1,24})(?::(?P<step>[0-9]{1,2}))?"
LABEL_LIMIT = 80
# Discord's limit for a link button's url; a longer link is shown as text to copy.
LINK_URL_LIMIT = 512
MESSAGE_TEXT_LIMIT = 1200


@dataclass(frozen=True, slots=True, kw_only=True)
class InputClick:
    """What a clicked button asks for, read back from its custom_id; `step` counts from 1."""

    action: InputAction
    request_id: str
    step: int = 1


def custom_id(click: InputClick) -> str:
    made = f"nerve:in:{_CODES[click.action]}:{click.request_id}"
    return fitted(made + f":{click.step}" if click.action == "step" else made, TEMPLATE)


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
    """(channel id, message id) of `message` when it is the request's own (it carries Decline)."""
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


def _body(request: InputRequest) -> list[str]:
    """What the server asked, the same before and after it was answered."""
    line = cards.asks(request)
    tools = ", ".join(code(tool, 80) for tool in request.tools[:5]) or "a tool call"
    lines = [f"{line.icon} **{code(request.server, 80)} {line.words}** (for {tools})"]
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


def request_text(request: InputRequest) -> str:
    """The message's content while the request waits for its person."""
    lines = _body(request)
    if request.refused is None:
        verb = "open the link or decline" if request.mode == "url" else "answer"
        who = f"Only {person(request.user_id)} (who asked) can {verb}."
        if request.expires_at:
            who += f" Expires <t:{int(request.expires_at)}:R>."
        lines.append(who)
        count = len(request.form.fields) if request.form is not None else 0
        if count > FIELDS_PER_STEP:
            lines.append(f"-# {count} fields: the form opens in {-(-count // FIELDS_PER_STEP)} steps.")
    return truncate("\n".join(lines), MESSAGE_LIMIT)[0]


def request_view(request: InputRequest) -> discord.ui.View | None:
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
    """What the asker alone sees after "Open": the host and a link button (or the link to copy)."""
    host = link_host(url)
    if len(url) <= LINK_URL_LIMIT:
        label = truncate(f"Open {host}", LABEL_LIMIT)[0]
        view = view_of(discord.ui.Button(style=discord.ButtonStyle.link, url=url, label=label))
        return f"The link goes to **{code(host, 300)}**. Open it to go on:", view
    shown = truncate(url.replace("`", "%60"), MESSAGE_LIMIT - 200)[0]
    return f"The link goes to **{code(host, 300)}**. Copy it into your browser:\n```\n{shown}\n```", None

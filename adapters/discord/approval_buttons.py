"""The buttons of an approval message, which keep working after the bot restarts.

Each button's custom_id carries everything a click needs: what it does, the request id, the call
(its id, or its position when the id does not fit) and the first characters of the hash of what was
shown. discord.py routes any click whose custom_id matches the template to `ApprovalButton`, in
whichever process receives it, so no view has to be kept in memory; the click handler checks the
hash against the stored request, so a button can only ever decide the call it was drawn for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import discord

from adapters.common.desk import AT, HASH_CHARS, Choice, batch_hash, find_call
from bot.text import truncate
from bot.types import ApprovalPrompt, PendingCall

Action = Choice
_CODES: dict[Action, str] = {
    "approve": "a",
    "deny": "d",
    "approve_all": "A",
    "deny_all": "D",
    "always": "R",
}
_ACTIONS: dict[str, Action] = {code: action for action, code in _CODES.items()}
ALL_CALLS = "*"
CUSTOM_ID_LIMIT = 100
_SAFE_CALL_ID = re.compile(r"[A-Za-z0-9_.-]{1,48}")
TEMPLATE = (
    r"nerve:ap:(?P<action>[adADR]):(?P<request>[A-Za-z0-9_-]{1,24}):"
    r"(?P<call>[A-Za-z0-9_.~*-]{1,48}):(?P<hash>[0-9a-f]{12})"
)
# Discord shows at most five rows of five buttons; the last row holds the buttons for all calls.
CALL_ROWS = 4
CALLS_PER_ROW = 2
LABEL_LIMIT = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class Click:
    """What a clicked button asks for, read back from its custom_id."""

    action: Action
    request_id: str
    # A call id, `~<position>` for a call whose id does not fit, or `*` for every open call.
    call: str
    shown_hash: str

    @property
    def approve(self) -> bool:
        return self.action in ("approve", "approve_all", "always")

    @property
    def remember(self) -> bool:
        return self.action == "always"


def call_ref(prompt: ApprovalPrompt, call: PendingCall) -> str:
    """How a button names a call: its id when that is short and plain, else its position."""
    if _SAFE_CALL_ID.fullmatch(call.call_id):
        return call.call_id
    return f"{AT}{prompt.calls.index(call)}"


def shown_hash(prompt: ApprovalPrompt, ref: str) -> str | None:
    """The short hash a button for `ref` must carry to decide on it; None when no such call exists."""
    if ref == ALL_CALLS:
        return batch_hash(prompt)
    call = find_call(prompt, ref)
    return call.call_hash[:HASH_CHARS] if call is not None else None


def custom_id(action: Action, request_id: str, ref: str, short_hash: str) -> str:
    made = f"nerve:ap:{_CODES[action]}:{request_id}:{ref}:{short_hash}"
    if len(made) > CUSTOM_ID_LIMIT or not re.fullmatch(TEMPLATE, made):
        raise ValueError(f"approval request id {request_id!r} does not fit in a Discord custom_id")
    return made


def parse(match: re.Match[str]) -> Click:
    return Click(
        action=_ACTIONS[match["action"]],
        request_id=match["request"],
        call=match["call"],
        shown_hash=match["hash"],
    )


@runtime_checkable
class ApprovalClicks(Protocol):
    """The client that handles approval clicks (the bot), found through `interaction.client`."""

    async def approval_clicked(self, interaction: discord.Interaction[Any], click: Click) -> None: ...


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=TEMPLATE):
    """One approval button; its click goes to the client's `approval_clicked`."""

    def __init__(
        self,
        click: Click,
        *,
        label: str,
        style: discord.ButtonStyle,
        row: int | None = None,
    ) -> None:
        super().__init__(
            discord.ui.Button(
                label=truncate(label, LABEL_LIMIT)[0],
                style=style,
                custom_id=custom_id(click.action, click.request_id, click.call, click.shown_hash),
                row=row,
            )
        )
        self.click = click

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ApprovalButton:
        button = item if isinstance(item, discord.ui.Button) else None
        return cls(
            parse(match),
            label=(button.label if button is not None else None) or "Decide",
            style=button.style if button is not None else discord.ButtonStyle.secondary,
        )

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        client = interaction.client
        if isinstance(client, ApprovalClicks):
            await client.approval_clicked(interaction, self.click)
        else:
            await interaction.response.defer()


def _button(
    prompt: ApprovalPrompt, action: Action, ref: str, label: str, style: discord.ButtonStyle, row: int
) -> ApprovalButton:
    short = shown_hash(prompt, ref)
    assert short is not None
    click = Click(action=action, request_id=prompt.request_id, call=ref, shown_hash=short)
    return ApprovalButton(click, label=label, style=style, row=row)


def approval_view(prompt: ApprovalPrompt) -> discord.ui.View | None:
    """The buttons for the calls still waiting; None once every call is decided (buttons go away)."""
    pending = [c for c in prompt.calls if c.status == "pending"]
    if not pending:
        return None
    view = discord.ui.View(timeout=None)
    green, red, grey = discord.ButtonStyle.success, discord.ButtonStyle.danger, discord.ButtonStyle.secondary
    if len(prompt.calls) == 1:
        ref = call_ref(prompt, pending[0])
        view.add_item(_button(prompt, "approve", ref, "Approve", green, 0))
        view.add_item(_button(prompt, "deny", ref, "Deny", red, 0))
        view.add_item(_button(prompt, "always", ALL_CALLS, "Always allow here", grey, 0))
        return view
    numbered = {c.call_id: i for i, c in enumerate(prompt.calls, start=1)}
    for slot, call in enumerate(pending[: CALL_ROWS * CALLS_PER_ROW]):
        ref, number, row = call_ref(prompt, call), numbered[call.call_id], slot // CALLS_PER_ROW
        view.add_item(_button(prompt, "approve", ref, f"Approve {number}. {call.tool}", green, row))
        view.add_item(_button(prompt, "deny", ref, f"Deny {number}", red, row))
    view.add_item(_button(prompt, "approve_all", ALL_CALLS, "Approve all", green, CALL_ROWS))
    view.add_item(_button(prompt, "deny_all", ALL_CALLS, "Deny all", red, CALL_ROWS))
    view.add_item(_button(prompt, "always", ALL_CALLS, "Always allow here", grey, CALL_ROWS))
    return view

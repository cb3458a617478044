"""The approval message: what a person is asked to allow, and the buttons that carry their answer.

Rendered from the stored request every time, so any process draws the same message. Each button's
value binds the click to one request and, for a single call, to the hash of the call that was shown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from adapters.common import cards
from adapters.common.desk import AT, CHOICES, ApprovalClick, Choice
from adapters.slack import render
from adapters.slack.render import (
    OutMessage,
    Upload,
    button,
    context,
    escape,
    escape_capped,
    quoted,
    section,
    when,
)
from bot.types import ApprovalPrompt, PendingCall

# Every approval button's action_id starts with this; the rest names the choice (and the call's place).
ACTION_PREFIX = "nerve_approval"
ACTION_PATTERN = re.compile(rf"^{ACTION_PREFIX}\.")

ARGUMENTS_INLINE = 2_400  # characters of a call's arguments shown in the message
CALLS_SHOWN = 20  # calls drawn one by one (each takes two blocks; a message holds 50)
BUTTON_VALUE_LIMIT = 2_000
_SLACK_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")


def person(user_id: str | None) -> str:
    """A Slack user as a mention when it is one, else their id as plain, escaped text."""
    return f"<@{user_id}>" if user_id and _SLACK_ID.match(user_id) else escape(user_id or "someone")


def argument_uploads(prompt: ApprovalPrompt) -> list[Upload]:
    """The full arguments of each call the message cannot show whole (or draw), as files for the thread."""
    return [
        Upload(
            filename=f"{render.tool_file_name(call.tool)}-{call.call_hash[:8]}-arguments.json",
            title=f"{call.tool} arguments (call {call.call_hash[:8]})",
            content=call.arguments_json(),
        )
        for index, call in enumerate(prompt.calls)
        if index >= CALLS_SHOWN or len(escape(call.arguments_json())) > ARGUMENTS_INLINE
    ]


def _value(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def _call_value(prompt: ApprovalPrompt, index: int, call: PendingCall) -> str:
    value = _value({"r": prompt.request_id, "c": call.call_id, "h": call.call_hash})
    if len(value) > BUTTON_VALUE_LIMIT:
        # A call id too long for a button: the call's position names it instead.
        value = _value({"r": prompt.request_id, "i": index, "h": call.call_hash})
    return value


def _button(
    text: str, choice: Choice, value: str, index: int | None = None, style: str | None = None
) -> dict[str, Any]:
    action_id = f"{ACTION_PREFIX}.{choice}" + (f".{index}" if index is not None else "")
    return button(text, action_id, value, style)


def _call_text(index: int, call: PendingCall, total: int) -> str:
    number = "" if total == 1 else f"{index + 1}. "
    if (question := cards.remember_question(call)) is not None:
        return f"{question.icon} *{number}{escape(question.headline)}*\n{quoted(question.text)}"
    head = f"*{number}`{escape_capped(call.tool, 150)}`* on `{escape_capped(call.server, 150)}`"
    shown = escape(call.arguments_json())
    if len(shown) <= ARGUMENTS_INLINE:
        return f"{head}\n```{shown}```"
    cut = escape_capped(call.arguments_json(), ARGUMENTS_INLINE - 1) + "…"
    note = "_Cut here: the full arguments are in the file attached to this thread._"
    return f"{head}\n```{cut}```\n{note}"


def approval_message(prompt: ApprovalPrompt) -> OutMessage:
    """The message for the request as it stands: open calls with buttons, decided ones with who decided."""
    calls = prompt.calls
    pending = [c for c in calls if c.status == "pending"]
    names = ", ".join(dict.fromkeys(c.tool for c in calls))
    headline = "🔐 *Approval needed* to run {}" if pending else "🔐 *Approval request for* {} — decided"
    # Memories to keep are asked as the question they are, not as a tool call.
    questions = cards.remember_questions(calls)
    if questions is not None:
        icon, asked = cards.questions_headline(questions)
        ended = "Memory to keep" if icon == "🧠" else asked
        headline = f"{icon} *{escape(asked)}*" if pending else f"{icon} *{escape(ended)}* — decided"
    blocks: list[dict[str, Any]] = [section(headline.format(escape_capped(names, 500)))]
    if prompt.reason:
        blocks.append(section("*What the model said it is for:*\n" + quoted(prompt.reason)))
    for index, call in enumerate(calls[:CALLS_SHOWN]):
        blocks.append(section(_call_text(index, call, len(calls))))
        if call.status == "pending":
            value = _call_value(prompt, index, call)
            question = cards.remember_question(call)
            yes, no = (question.yes, question.no) if question is not None else ("Approve", "Deny")
            blocks.append(
                {
                    "type": "actions",
                    "block_id": f"call.{index}",
                    "elements": [
                        _button(yes, "approve", value, index, "primary"),
                        _button(no, "deny", value, index, "danger"),
                    ],
                }
            )
        else:
            blocks.append(context(cards.decided(call).say(person=person, capital=True)))
    rest = calls[CALLS_SHOWN:]
    if rest:
        listed = ", ".join(f"`{escape_capped(c.tool, 80)}`" for c in rest)
        note = "_Their arguments are in the file attached to this thread._"
        blocks.append(section(f"*{len(rest)} more calls:* {listed}\n{note}"))
    if pending:
        batch_value = _value({"r": prompt.request_id})
        batch: list[dict[str, Any]] = []
        if len(calls) > 1:
            batch += [
                _button("Approve all", "approve_all", batch_value, style="primary"),
                _button("Deny all", "deny_all", batch_value, style="danger"),
            ]
        if questions is None:  # a memory is asked about each time: no "always"
            batch.append(_button("Always allow here", "always", batch_value))
        if batch:
            blocks.append({"type": "actions", "block_id": "batch", "elements": batch})
        who = (
            f"Only {person(prompt.requester)} (who asked) can decide"
            if cards.requesters_only(calls)
            else f"{person(prompt.requester)} (who asked) or an admin can decide"
        )
        blocks.append(context(f"{who} · expires {when(prompt.expires_at)}"))
    text = f"Approval needed to run {names}" if pending else f"Approval request for {names}: decided"
    if questions is not None and pending:
        text = f"{questions[0].headline} {questions[0].text}"
    return OutMessage(text=escape_capped(text, 3_000), blocks=blocks)


def parse_click(action: dict[str, Any]) -> ApprovalClick | None:
    """The click an approval button's action carries, or None when it is not one of ours."""
    parts = str(action.get("action_id") or "").split(".")
    choice = next((c for c in CHOICES if len(parts) >= 2 and c == parts[1]), None)
    if parts[0] != ACTION_PREFIX or choice is None:
        return None
    try:
        value = json.loads(str(action.get("value") or ""))
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("r"), str):
        return None
    call_id, shown, index = value.get("c"), value.get("h"), value.get("i")
    call = call_id if isinstance(call_id, str) else f"{AT}{index}" if isinstance(index, int) else None
    return ApprovalClick(
        choice=choice,
        request_id=value["r"],
        call=call,
        shown_hash=shown if isinstance(shown, str) else None,
    )

"""Is this HTTP delivery from Slack, and has it the shape slack-bolt and nerve read, before either reads it?

The signature is checked over the raw bytes, before anything decodes them. A body that breaks
slack-bolt's assumptions raises inside bolt, which answers 500, and Slack retries a 500: checked here
first, each is a refusal (401, 400) with one reason for the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

# Fields slack-bolt and nerve look into, by the type Slack gives them wherever they appear.
_OBJECT = frozenset(
    {"event", "view", "message", "previous_message", "item", "assistant_thread", "function_data"}
    | {"container", "state", "values", "bot_profile", "enterprise_user"}
)
_LIST_OF_OBJECTS = frozenset({"authorizations", "actions", "response_urls", "blocks", "files"})
_TEXT_OR_OBJECT = frozenset({"team", "user", "enterprise", "channel"})
_TEXT = frozenset(
    {"type", "subtype", "event_id", "team_id", "enterprise_id", "user_id", "channel_id", "channel_type"}
    | {"ts", "thread_ts", "event_ts", "callback_id", "action_id", "block_id", "trigger_id"}
    | {"response_url", "private_metadata", "command", "api_app_id", "bot_id", "app_id", "id"}
)


def _body(raw: str, content_type: str | None) -> Any:
    """The body as slack-bolt will read it (the same rules, in the same order)."""
    if not raw:
        return {}
    if content_type == "application/json" or raw.startswith("{"):
        return json.loads(raw)
    if "payload" in raw:
        payload = dict(parse_qsl(raw, keep_blank_values=True)).get("payload")
        return {} if payload is None else json.loads(payload)
    return dict(parse_qsl(raw, keep_blank_values=True))


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _problems(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _problems(item, f"{where}[{i}]")
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        at = f"{where}.{key}" if where else str(key)
        if key in _OBJECT and not isinstance(item, dict):
            yield f"{at} is {_kind(item)}, not an object"
        elif key in _LIST_OF_OBJECTS and not (
            isinstance(item, list) and all(isinstance(entry, dict) for entry in item)
        ):
            yield f"{at} is not a list of objects"
        elif key in _TEXT_OR_OBJECT and not isinstance(item, str | dict | None):
            yield f"{at} is {_kind(item)}, not text or an object"
        elif key in _TEXT and not isinstance(item, str | None):
            yield f"{at} is {_kind(item)}, not text"
        else:
            yield from _problems(item, at)


# What slack-bolt looks up without asking whether it is there, by the delivery's type.
_NEEDS: dict[str, tuple[str, ...]] = {
    "event_callback": ("event.type",),
    "block_actions": ("actions.0.action_id",),
    "interactive_message": ("actions.0", "callback_id"),
    **dict.fromkeys(("view_submission", "view_closed"), ("view.callback_id", "view.type")),
    **dict.fromkeys(
        ("shortcut", "message_action", "dialog_submission", "dialog_cancellation", "workflow_step_edit"),
        ("callback_id",),
    ),
}
# Events of an assistant thread: slack-bolt finds the thread in them before any listener runs.
_EVENT_NEEDS = dict.fromkeys(
    ("assistant_thread_started", "assistant_thread_context_changed"),
    ("event.assistant_thread.channel_id", "event.assistant_thread.thread_ts"),
)


def _needs(body: dict[str, Any]) -> tuple[str, ...]:
    needs = _NEEDS.get(str(body.get("type")), ())
    event = body.get("event")
    if body.get("type") == "event_callback" and isinstance(event, dict):
        needs += _EVENT_NEEDS.get(str(event.get("type")), ())
        if event.get("type") == "message" and event.get("thread_ts") is not None:
            needs += ("event.channel",)
    return needs


def _missing(body: dict[str, Any]) -> str | None:
    for path in _needs(body):
        value: Any = body
        for step in path.split("."):
            if isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            elif isinstance(value, dict) and step in value:
                value = value[step]
            else:
                return f"a {body['type']} delivery without {path}"
    return None


def delivery_problem(raw: str, content_type: str | None) -> str | None:
    """What makes a delivery unreadable, or None when slack-bolt can read it safely."""
    try:
        body = _body(raw, content_type)
        if not isinstance(body, dict):
            return f"the body is {_kind(body)}, not an object"
        if not body:
            return "the body is empty"
        return next(_problems(body, ""), None) or _missing(body) or _untyped(body)
    except ValueError:  # only reading the JSON raises it
        return "the body is not JSON"
    except RecursionError:
        return "the body is nested too deep"


def _untyped(body: dict[str, Any]) -> str | None:
    """A body slack-bolt would route nowhere ("Unhandled request", a 404): Slack's events and
    interactions carry a type, its slash commands a command, its certificate checks ssl_check."""
    if body.get("type") is None and not {"command", "ssl_check"} & body.keys():
        return "the body has no type (nor a command): it is no Slack event, interaction or command"
    return None


# Slack refuses to accept replays older than five minutes; so do we.
MAX_AGE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def signature_problem(
    secret: str, raw: bytes, timestamp: str | None, signature: str | None, *, now: float
) -> str | None:
    """None when `raw` was signed with `secret` within the last five minutes; else what is wrong."""
    if not timestamp:
        return "no X-Slack-Request-Timestamp header"
    if not signature:
        return "no X-Slack-Signature header"
    if _TIMESTAMP.fullmatch(timestamp) is None:
        return "X-Slack-Request-Timestamp is not a number of seconds"
    if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
        return "X-Slack-Request-Timestamp is more than five minutes away (a replay, or a wrong clock)"
    if _SIGNATURE.fullmatch(signature) is None:
        return "X-Slack-Signature is not of the form v0=<64 hex digits>"
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, hashlib.sha256)
    if not hmac.compare_digest("v0=" + digest.hexdigest(), signature):
        return "X-Slack-Signature does not match the body (wrong SLACK_SIGNING_SECRET, or not Slack)"
    return None

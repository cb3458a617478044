"""Slack event payloads → turns: which posts the bot answers, where, and in which conversation; and
what the inbox keeps of a delivery.

Pure functions, so the rules are applied the same way to live deliveries and to start-up recovery.
The inbox keeps only the fields `classify` reads, in the body's own shape
(`migrations/0003_inbox_minimal_payloads.sql` reduced older entries to the same), shared files'
metadata included (`adapters.slack.files.KEPT_FIELDS`), so a replayed event still has its files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from adapters.slack.files import FileRef, file_refs, kept_files
from bot.text import scrub
from bot.types import ConversationKey, Incoming, Place

PLATFORM = "slack"
# The conversation key's thread for a user's top-level DMs: one running conversation per DM channel.
DM_THREAD = "dm"
RESET_WORDS = frozenset({"reset", "/reset", "!reset"})
# Message subtypes that are a person (or, if allowed, a bot) saying something new. Everything else —
# edits (message_changed), deletions, joins, topic changes, … — is not a turn.
_TURN_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})

TurnKind = Literal["answer", "reset"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One post the bot must answer, and where the answer goes."""

    incoming: Incoming
    kind: TurnKind
    channel: str
    # Where replies go: the thread root, or None for a top-level DM answered top-level (Assistant experience).
    reply_thread_ts: str | None
    # A DM thread: Slack's assistant container, where status shows via assistant.threads.setStatus.
    assistant_thread: bool
    # The person's post itself (None for a turn taken back from the store): where 👀 goes.
    message_ts: str | None = None
    # Files shared with the post, as its event describes them (`adapters.slack.files`).
    files: tuple[FileRef, ...] = ()

    @property
    def key(self) -> ConversationKey:
        return self.incoming.key

    @property
    def event_id(self) -> str:
        return self.incoming.event_id or ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """Who the bot is in this workspace (from auth.test), to ignore its own posts and strip mentions."""

    user_id: str
    bot_id: str | None = None
    # The bot user's name, for the log line saying as whom nerve is connected.
    name: str = ""


def strip_mention(text: str, bot_user_id: str) -> str:
    """Remove `<@BOTID>` (and `<@BOTID|name>`) so the model sees only what the user asked."""
    return re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)


def unescape(text: str) -> str:
    """Undo Slack's escaping of `&`, `<`, `>` in user text, so the model reads what the user typed."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _author(event: Mapping[str, Any], me: Identity, allow_bots: bool) -> str | None:
    """The id of the post's author, or None when the post must be ignored (ours, or another bot's)."""
    user = event.get("user")
    bot_id = event.get("bot_id")
    if user == me.user_id or (bot_id is not None and bot_id == me.bot_id):
        return None
    if bot_id is not None or event.get("subtype") == "bot_message":
        return scrub(str(user or bot_id)) if allow_bots and (user or bot_id) else None
    return scrub(str(user)) if user else None


def classify(
    body: Mapping[str, Any],
    me: Identity,
    *,
    allow_bots: bool,
    follow_threads: bool,
    followed: Callable[[ConversationKey], bool],
    dm_threads: bool = False,
) -> Turn | None:
    """The turn an Events API body asks for, or None when the bot should stay silent. A channel
    post that mentions the bot comes as `message` and `app_mention`: only the latter is answered.
    With `dm_threads` (the Agent messaging experience) a top-level DM is the root of its own thread,
    as Slack's Messages tab shows it: answered in that thread, its own conversation and agent session;
    else top-level DMs are one running conversation, answered top-level."""
    if body.get("type") != "event_callback":
        return None
    event = body.get("event")
    if not isinstance(event, Mapping):
        return None
    kind = event.get("type")
    allowed = _TURN_SUBTYPES | ({"bot_message"} if allow_bots else set())
    if kind not in ("app_mention", "message") or event.get("subtype") not in allowed:
        return None
    author = _author(event, me, allow_bots)
    channel, ts = event.get("channel"), event.get("ts")
    if author is None or not isinstance(channel, str) or not isinstance(ts, str):
        return None
    # Everything taken from the payload is scrubbed: JSON may carry lone surrogates ("\ud800"),
    # which no store, encoder or HTTP client accepts.
    channel, ts = scrub(channel), scrub(ts)
    raw = scrub(str(event.get("text") or ""))
    thread_ts = event.get("thread_ts")
    thread = scrub(str(thread_ts)) if thread_ts else None
    team = scrub(str(body.get("team_id") or event.get("team") or ""))
    mentions_me = f"<@{me.user_id}" in raw

    assistant = False
    dm = kind == "message" and event.get("channel_type") == "im"
    if dm:
        own = thread or (ts if dm_threads else None)
        key_thread, reply_to, assistant = (own or DM_THREAD), own, own is not None
    elif kind == "message":
        if not follow_threads or thread is None or mentions_me:
            return None
        key_thread, reply_to = thread, thread
        if not followed(ConversationKey(platform=PLATFORM, workspace=team, channel=channel, thread=thread)):
            return None
    else:
        # A DM never needs its app_mention twin: the `message.im` event is the one we answer.
        if channel.startswith("D"):
            return None
        key_thread = reply_to = thread or ts

    key = ConversationKey(platform=PLATFORM, workspace=team, channel=channel, thread=key_thread)
    text = unescape(strip_mention(raw, me.user_id)).strip()
    event_id = scrub(str(body.get("event_id") or f"{channel}:{ts}"))
    place = Place(platform=PLATFORM, channel=channel, dm=dm, user=author, team=team or None)
    incoming = Incoming(key=key, text=text, user_id=author, event_id=event_id, place=place)
    turn_kind: TurnKind = "reset" if text.lower() in RESET_WORDS else "answer"
    return Turn(
        incoming=incoming,
        kind=turn_kind,
        channel=channel,
        reply_thread_ts=reply_to,
        assistant_thread=assistant,
        message_ts=ts,
        files=file_refs(event),
    )


def turn_in(incoming: Incoming) -> Turn:
    """Where to answer a message taken back from the store (a resumed turn, one that waited)."""
    key = incoming.key
    reply_to = None if key.thread == DM_THREAD else key.thread
    return Turn(
        incoming=incoming,
        kind="answer",
        channel=key.channel,
        reply_thread_ts=reply_to,
        assistant_thread=is_dm_channel(key.channel) and reply_to is not None,
    )


def person_key(workspace: str, channel: str) -> ConversationKey:
    """A key for "this person in this workspace, where they typed", outside any conversation."""
    return ConversationKey(platform=PLATFORM, workspace=workspace, channel=channel, thread="-")


def typed_in(command: Mapping[str, Any]) -> Incoming:
    """A slash command as an `Incoming` that stands for "where it was typed, by whom", outside any
    conversation, for what the policy decides (commands carry no channel_type)."""
    channel, user = str(command.get("channel_id") or ""), str(command.get("user_id") or "")
    dm = is_dm_channel(channel, command.get("channel_name"))
    team = str(command.get("team_id") or "")
    place = Place(platform=PLATFORM, channel=channel, dm=dm, user=user, team=team or None)
    key = person_key(team, channel)
    return Incoming(key=key, text="", user_id=user, place=place)


def is_dm_channel(channel_id: str, channel_name: str | None = None) -> bool:
    """Slash commands carry no channel_type: DM channel ids start with D (name "directmessage")."""
    return channel_id.startswith("D") or channel_name == "directmessage"


BODY_FIELDS = ("type", "event_id", "team_id")
EVENT_FIELDS = (
    *("type", "subtype", "user", "bot_id", "channel", "channel_type"),
    *("ts", "thread_ts", "text", "team"),
)


def inbox_payload(body: Mapping[str, Any]) -> str:
    """The delivery reduced to the fields a replay needs, as JSON (ASCII: lone surrogates stay storable)."""
    kept: dict[str, Any] = {name: body[name] for name in BODY_FIELDS if name in body}
    event = body.get("event")
    if isinstance(event, Mapping):
        kept["event"] = {name: event[name] for name in EVENT_FIELDS if name in event}
        files = kept_files(event)
        if files:
            kept["event"]["files"] = files
    return json.dumps(kept)

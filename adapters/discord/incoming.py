"""From discord.py objects to the core's `Incoming`: who asked what, in which conversation.

Keys: a DM is `discord:dm:<dm channel>:<user>`; a thread `discord:<guild>:<parent channel>:<thread>`.
A mention or `/ask` in a plain channel takes a message's id as its `thread` part: Discord gives a
thread opened on that message the message's id, so its later messages land on the same key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import discord
from discord.state import ConnectionState

from adapters.discord.files import AttachmentRecord, from_records, records, shared_files
from bot.types import ConversationKey, Incoming, Place

PLATFORM = "discord"
DM_WORKSPACE = "dm"
_ANSWERABLE = (discord.MessageType.default, discord.MessageType.reply)


def dm_key(channel_id: int, user_id: int) -> ConversationKey:
    return ConversationKey(
        platform=PLATFORM, workspace=DM_WORKSPACE, channel=str(channel_id), thread=str(user_id)
    )


def thread_key(guild_id: int, parent_id: int, thread_id: int) -> ConversationKey:
    """Also the key of a conversation whose thread is about to be opened on message `thread_id`."""
    return ConversationKey(
        platform=PLATFORM, workspace=str(guild_id), channel=str(parent_id), thread=str(thread_id)
    )


def place_of(key: ConversationKey, user_id: str) -> Place:
    """Where scopes and "always allow here" see a conversation: its guild and channel (for a thread,
    its parent channel, so a channel's rules cover its threads), or the DM; and who wrote."""
    if key.workspace == DM_WORKSPACE:
        return Place(platform=PLATFORM, channel=key.channel, dm=True, user=user_id)
    return Place(platform=PLATFORM, guild=key.workspace, channel=key.channel, user=user_id)


def interaction_key(interaction: discord.Interaction[Any], new_thread: int | None) -> ConversationKey | None:
    """An interaction's conversation: its DM, its thread, or in a plain channel the thread to open on
    message `new_thread` (None without one)."""
    channel = interaction.channel
    channel_id = interaction.channel_id or (channel.id if channel else 0)
    if interaction.guild_id is None:
        return dm_key(channel_id, interaction.user.id)
    if isinstance(channel, discord.Thread):
        return thread_key(interaction.guild_id, channel.parent_id, channel.id)
    return None if new_thread is None else thread_key(interaction.guild_id, channel_id, new_thread)


def answer_channel(key: ConversationKey) -> tuple[int, int | None]:
    """Where a later answer in this conversation goes (channel id, guild id): its thread, or the DM."""
    if key.workspace == DM_WORKSPACE:
        return int(key.channel), None
    return int(key.thread), int(key.workspace)


def message_of(event_id: str | None) -> int | None:
    """The id of the user's message a delivery came from (None for a slash command)."""
    return int(event_id[2:]) if event_id and event_id.startswith("m:") and event_id[2:].isdigit() else None


def to_incoming(
    source: discord.Message | discord.Interaction[Any],
    bot_user_id: int,
    *,
    answer_id: int | None = None,
    text: str | None = None,
    attachments: Sequence[discord.Attachment] = (),
) -> Incoming | None:
    """The `Incoming` for a message or a slash command, or None when it is not for the bot. `answer_id`
    is `/ask`'s deferred answer (a thread opens on it); `text` replaces the `question` option;
    `attachments` are `/ask`'s `file` option (a message brings its own)."""
    if isinstance(source, discord.Message):
        return _from_message(source, bot_user_id)
    if text is None:  # the `question` option, read from the raw interaction data
        data: Any = source.data or {}
        options = data.get("options", []) or []
        text = next((str(o.get("value", "")) for o in options if o.get("name") == "question"), "")
    key = interaction_key(source, answer_id or source.id)
    if not (text.strip() or attachments) or key is None:
        return None
    return _incoming(key, text.strip(), source.user, f"i:{source.id}", attachments)


def _from_message(message: discord.Message, bot_user_id: int) -> Incoming | None:
    author = message.author
    if author.bot or author.id == bot_user_id or message.type not in _ANSWERABLE:
        return None
    mention = re.compile(rf"<@!?{bot_user_id}>")  # the bot's own `<@id>` / `<@!id>`
    text = mention.sub("", message.content).strip()
    attachments = message.attachments
    if not text and not attachments:
        # Empty after the mention, or blanked by Discord because the message-content intent is off
        # (which empties a message's attachments too). A file alone is a question about it.
        return None
    event_id = f"m:{message.id}"
    channel = message.channel
    # A guild missing from the cache still has its id on the channel: never mistake it for a DM.
    guild_id = message.guild.id if message.guild else getattr(channel, "guild_id", None)
    if guild_id is None:
        return _incoming(dm_key(channel.id, author.id), text, author, event_id, attachments)
    addressed = any(user.id == bot_user_id for user in message.mentions) or bool(
        mention.search(message.content)
    )
    if isinstance(channel, discord.Thread):
        key = thread_key(guild_id, channel.parent_id, channel.id)
        # In a thread of mine every message continues it; elsewhere only one that mentions me.
        addressed = addressed or channel.owner_id == bot_user_id
    else:
        key = thread_key(guild_id, channel.id, message.id)
    return _incoming(key, text, author, event_id, attachments) if addressed else None


def _incoming(
    key: ConversationKey,
    text: str,
    user: discord.abc.User,
    event_id: str,
    attachments: Sequence[discord.Attachment],
) -> Incoming:
    return Incoming(
        key=key,
        text=text,
        user_id=str(user.id),
        user_name=user.display_name or user.name,
        event_id=event_id,
        place=place_of(key, str(user.id)),
        files=shared_files(attachments),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """Everything needed to answer a delivery, also after a restart (it is the inbox payload)."""

    kind: str  # "message" or "interaction"
    key: ConversationKey
    text: str
    user_id: str
    user_name: str
    event_id: str
    channel_id: int
    message_id: int  # the user's message, or the interaction's answer message
    open_thread: bool
    # The attachments shared with it, as Discord described them (downloaded only by its turn).
    files: tuple[AttachmentRecord, ...] = ()
    # Read back at a start, left unanswered by the process before: waits for a turn slot, never "busy".
    replayed: bool = False

    @property
    def incoming(self) -> Incoming:
        """The delivery as the core reads it, without its files (`incoming_on` adds them)."""
        return Incoming(
            key=self.key,
            text=self.text,
            user_id=self.user_id,
            user_name=self.user_name,
            event_id=self.event_id,
            place=place_of(self.key, self.user_id),
            replayed=self.replayed,
        )

    def incoming_on(self, state: ConnectionState[Any]) -> Incoming:
        """The delivery with its files, downloaded (when the core reads them) by `state`'s client."""
        return replace(self.incoming, files=from_records(self.files, state))

    @property
    def thread_name(self) -> str:
        """What a thread opened on it is called: the question, else its files' names."""
        return self.text or ", ".join(str(record.get("filename", "")) for record in self.files)

    def to_json(self) -> str:
        data = asdict(self)
        del data["replayed"]  # a fact of the process that reads the payload back, not of the delivery
        return json.dumps(data)

    @classmethod
    def from_json(cls, payload: str) -> Job:
        data = json.loads(payload)
        data["key"] = ConversationKey(**data["key"])
        data["files"] = tuple(dict(record) for record in data.get("files", ()))
        return cls(**data)


def job_for(
    incoming: Incoming,
    *,
    kind: str,
    channel_id: int,
    message_id: int,
    attachments: Sequence[discord.Attachment] = (),
) -> Job:
    """A job; it opens a thread when the conversation's key names a message, not an existing thread.
    `attachments` are the files `incoming` carries, kept so that any process can download them."""
    open_thread = incoming.key.workspace != DM_WORKSPACE and incoming.key.thread == str(message_id)
    return Job(
        kind=kind,
        key=incoming.key,
        text=incoming.text,
        user_id=incoming.user_id,
        user_name=incoming.user_name,
        event_id=incoming.event_id or "",
        channel_id=channel_id,
        message_id=message_id,
        open_thread=open_thread,
        files=records(attachments),
    )

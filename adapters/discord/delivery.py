"""Posting to Discord safely: no pings, no posting where we are not allowed, "typing…" while a turn runs.

Every send passes `AllowedMentions.none()` itself (besides the client default), so text from the
model or a tool can never ping @everyone, @here, a role or a user, whichever code path sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import discord

from bot.agent import KeyedLocks
from bot.types import ConversationKey

logger = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
TYPING_EVERY = 8.0  # Discord shows "typing…" for 10 s per trigger


class ChannelGuard:
    """Channels where Discord answered 403: we stop posting there until the bot restarts.

    Retrying a channel we may not write to only earns more 403s, and Discord temporarily bans
    bots that collect too many of them.
    """

    def __init__(self) -> None:
        self._blocked: set[int] = set()

    def blocked(self, channel_id: int) -> bool:
        return channel_id in self._blocked

    def block(self, channel_id: int, exc: discord.Forbidden) -> None:
        if channel_id not in self._blocked:
            self._blocked.add(channel_id)
            logger.warning(
                "Discord refused a post in channel %s (403, code %s: %s); not posting there again until "
                "restart. Give the bot Send Messages (and Create Public Threads) there.",
                channel_id,
                exc.code,
                exc.text,
            )


async def send_chunks(
    channel: discord.abc.Messageable,
    chunks: list[str],
    *,
    guard: ChannelGuard,
    channel_id: int,
    view: discord.ui.View | None = None,
    reference: discord.MessageReference | None = None,
) -> list[discord.Message]:
    """Post the chunks in order (the first as a reply, the last with the view); stop at the first failure."""
    sent: list[discord.Message] = []
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        message = await send_message(
            channel,
            chunk,
            guard=guard,
            channel_id=channel_id,
            view=view if last else None,
            reference=reference if i == 0 else None,
        )
        if message is None:
            break
        sent.append(message)
    return sent


async def send_message(
    channel: discord.abc.Messageable,
    content: str,
    *,
    guard: ChannelGuard,
    channel_id: int,
    embeds: Sequence[discord.Embed] = (),
    file: discord.File | None = None,
    files: Sequence[discord.File] = (),
    view: discord.ui.View | None = None,
    reference: discord.MessageReference | None = None,
) -> discord.Message | None:
    """A channel message with optional embeds, files, view and reply reference; None on failure."""
    if guard.blocked(channel_id):
        return None
    given = {"embeds": list(embeds), "file": file, "files": list(files), "view": view, "reference": reference}
    extra: dict[str, Any] = {name: value for name, value in given.items() if value not in (None, [])}
    try:
        return await channel.send(content, allowed_mentions=NO_MENTIONS, **extra)
    except discord.Forbidden as exc:
        guard.block(channel_id, exc)
    except discord.RateLimited as exc:
        logger.warning(
            "Discord asked to wait %.0f s before posting in channel %s, longer than "
            "NERVE_DISCORD_MAX_RATELIMIT_TIMEOUT allows; this reply was not posted",
            exc.retry_after,
            channel_id,
        )
    except discord.HTTPException as exc:
        logger.warning("posting in channel %s failed: %s %s", channel_id, exc.status, exc.text)
    return None


def reply_reference(channel_id: int, message_id: int, guild_id: int | None) -> discord.MessageReference:
    """A reply that still posts if the user's message was deleted meanwhile."""
    return discord.MessageReference(
        message_id=message_id, channel_id=channel_id, guild_id=guild_id, fail_if_not_exists=False
    )


class Typing:
    """Keeps "typing…" showing while a turn runs; a failure to show it never fails the turn."""

    def __init__(self, channel: discord.abc.Messageable) -> None:
        self._channel = channel
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Typing:
        self._task = asyncio.create_task(self._run(), name="discord-typing")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                await self._channel.typing()
            except discord.HTTPException as exc:
                logger.debug("typing indicator failed: %s", exc)
                return
            await asyncio.sleep(TYPING_EVERY)


class ConversationOrder(KeyedLocks[ConversationKey]):
    """One FIFO lock per conversation, held from the turn until its reply is posted.

    The agent already runs one turn per conversation at a time, but posting happens after the turn:
    without this, a quick second answer could overtake a first one still being posted.
    """

"""Where a live answer's messages go: channel messages, or an interaction's response and follow-ups.

A `Page` is one message the answer is shown in, edited in place; a `Poster` adds the next one. For a
mention or a DM the pages are channel messages, the first a reply to the user's message. For `/ask`
the first page is the deferred response and the next ones are follow-ups, all through the
interaction's token; that token expires after 15 minutes (the fake and Discord then answer 404
Unknown Webhook), and from then on the answer goes on as channel messages replying to the response.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

import discord
from discord.utils import MISSING

from adapters.discord.delivery import NO_MENTIONS, ChannelGuard, send_message
from adapters.discord.render import escape_text, reply_files
from bot.text import truncate
from bot.types import Attachment

logger = logging.getLogger(__name__)


class PageGone(Exception):
    """This page can no longer be edited (deleted, or its interaction token expired): post anew."""


class Page(Protocol):
    """One message of the answer."""

    @property
    def message_id(self) -> int | None: ...

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        """Show `content` (and `view`, if given); `PageGone` when the message cannot be edited."""
        ...

    async def delete(self) -> None: ...


class Poster(Protocol):
    async def post(
        self, content: str, *, view: discord.ui.View | None = None, files: Sequence[discord.File] = ()
    ) -> Page | None:
        """The next message of the answer; None when it could not be posted (already logged)."""
        ...


def _view(view: discord.ui.View | None) -> Any:
    # MISSING leaves the message's components as they are; None would remove them.
    return MISSING if view is None else view


@dataclass(eq=False)
class ChannelPage:
    """A channel message of ours; a partial one (only its id known) when a job run again goes on in
    the messages of the run before (`adapters.discord.kept_pages`)."""

    message: discord.Message | discord.PartialMessage
    guard: ChannelGuard
    channel_id: int

    @property
    def message_id(self) -> int | None:
        return self.message.id

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        if self.guard.blocked(self.channel_id):
            raise PageGone("posting in this channel is refused")
        try:
            self.message = await self.message.edit(
                content=content, view=_view(view), allowed_mentions=NO_MENTIONS
            )
        except discord.NotFound as exc:
            raise PageGone(f"message {self.message.id} is gone") from exc
        except discord.Forbidden as exc:
            self.guard.block(self.channel_id, exc)
            raise PageGone("posting in this channel is refused") from exc

    async def delete(self) -> None:
        try:
            await self.message.delete()
        except discord.HTTPException as exc:
            logger.debug("could not delete message %s: %s", self.message.id, exc)


@dataclass(eq=False)
class ChannelPoster:
    """Channel messages; the first one replies to `reference` (None once one was posted)."""

    channel: discord.abc.Messageable
    _: KW_ONLY
    guard: ChannelGuard
    channel_id: int
    reference: discord.MessageReference | None = None

    async def post(
        self, content: str, *, view: discord.ui.View | None = None, files: Sequence[discord.File] = ()
    ) -> ChannelPage | None:
        message = await send_message(
            self.channel,
            content,
            guard=self.guard,
            channel_id=self.channel_id,
            files=files,
            view=view,
            reference=self.reference,
        )
        if message is None:
            return None
        self.reference = None
        return ChannelPage(message, self.guard, self.channel_id)


class InteractionPage:
    """The deferred response (`followup` None) or a follow-up, edited through the token."""

    def __init__(
        self,
        interaction: discord.Interaction[Any],
        followup: discord.WebhookMessage | None = None,
        message_id: int | None = None,
    ) -> None:
        self._interaction = interaction
        self._followup = followup
        self._message_id = followup.id if followup is not None else message_id

    @property
    def message_id(self) -> int | None:
        return self._message_id

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        if self._interaction.is_expired():
            raise PageGone("the interaction token expired")
        try:
            if self._followup is None:
                await self._interaction.edit_original_response(
                    content=content, view=_view(view), allowed_mentions=NO_MENTIONS
                )
            else:
                await self._followup.edit(content=content, view=_view(view), allowed_mentions=NO_MENTIONS)
        except discord.NotFound as exc:
            raise PageGone("the interaction token expired or the message is gone") from exc

    async def delete(self) -> None:
        if self._followup is None or self._interaction.is_expired():
            return
        try:
            await self._followup.delete()
        except discord.HTTPException as exc:
            logger.debug("could not delete follow-up %s: %s", self._followup.id, exc)


class InteractionPoster:
    """Follow-ups through the token while it lasts, then channel messages replying to the response."""

    def __init__(self, interaction: discord.Interaction[Any], fallback: ChannelPoster) -> None:
        self._interaction = interaction
        self._fallback = fallback
        self._expired = False

    def gone(self) -> None:
        """The token stopped working: post everything after this in the channel."""
        if not self._expired:
            logger.info(
                "interaction %s outlived its 15-minute token; answering in the channel", self._interaction.id
            )
        self._expired = True

    async def post(
        self, content: str, *, view: discord.ui.View | None = None, files: Sequence[discord.File] = ()
    ) -> Page | None:
        if self._interaction.is_expired():
            self.gone()
        if not self._expired:
            try:
                message = await self._interaction.followup.send(
                    content,
                    view=_view(view),
                    files=list(files) if files else MISSING,
                    allowed_mentions=NO_MENTIONS,
                    wait=True,
                )
                return InteractionPage(self._interaction, message)
            except discord.HTTPException as exc:
                logger.warning(
                    "answering interaction %s through its token failed (%s %s); answering in the channel",
                    self._interaction.id,
                    exc.status,
                    exc.text,
                )
                self.gone()
                for file in files:
                    file.reset()  # read once by the failed request: from the start again
        return await self._fallback.post(content, view=view, files=files)


async def post_files(poster: Poster, attachments: tuple[Attachment, ...]) -> None:
    """The files and images the tools of an answer returned, in one message right after it, through
    the poster the answer went through; those Discord cannot take are named there instead, and a
    message Discord refuses becomes a one-line note, never a lost answer."""
    shown = reply_files(attachments)
    if shown is None:
        return
    if await poster.post(shown.content, files=shown.discord_files()) is not None or not shown.files:
        return
    names = ", ".join(escape_text(name) for name, _ in shown.files)
    await poster.post(truncate(f"-# ⚠️ Could not attach {names}.", 2000)[0])

"""Where a live answer's messages go: channel messages, or an interaction's response and follow-ups.

A `Page` is one message of the answer, edited in place; a `Poster` adds the next one. With jobs, a
turn's channel pages are recorded in the posts ledger (`TurnPages`), so a job run again after its
process died goes on in the messages still there and posts only what is missing, files once.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

import discord
from discord.utils import MISSING

from adapters.common.posts import PostLedger
from adapters.discord.delivery import NO_MENTIONS, ChannelGuard, landed, send_message
from adapters.discord.render import escape_text, reply_files
from bot.agent import PostRecords
from bot.text import truncate
from bot.types import Attachment

logger = logging.getLogger(__name__)


class PageGone(Exception):
    """This page can no longer be edited (deleted, or its interaction token expired): post anew."""


class Page(Protocol):
    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        """Show `content` (and `view`, if given); `PageGone` when the message cannot be edited."""

    async def delete(self) -> None: ...


class Poster(Protocol):
    async def post(
        self, content: str, *, view: discord.ui.View | None = None, files: Sequence[discord.File] = ()
    ) -> Page | None:
        """The next message of the answer; None when it could not be posted (already logged)."""


def _view(view: discord.ui.View | None) -> Any:
    # MISSING leaves the message's components as they are; None would remove them.
    return MISSING if view is None else view


@dataclass(eq=False)
class ChannelPage:
    """A channel message of ours (partial when a job run again goes on in it); one `kept` by its
    turn (`TurnPages`, and its part there) records its end for a second run."""

    message: discord.Message | discord.PartialMessage
    guard: ChannelGuard
    channel_id: int
    kept: tuple[TurnPages, str] | None = None

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        try:
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
        except PageGone:
            await self._gone()
            raise

    async def delete(self) -> None:
        await landed(
            self.message.delete(), "could not delete message %s", self.message.id, level=logging.DEBUG
        )
        await self._gone()

    async def _gone(self) -> None:
        if self.kept is not None:
            await self.kept[0].gone(self.kept[1])


@dataclass(eq=False)
class ChannelPoster:
    """Channel messages; the first one replies to `reference` (None once one was posted)."""

    channel: discord.PartialMessageable
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


@dataclass(eq=False)
class InteractionPage:
    """The deferred response (`followup` None) or a follow-up, edited through the token."""

    interaction: discord.Interaction[Any]
    followup: discord.WebhookMessage | None = None

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        if self.interaction.is_expired():
            raise PageGone("the interaction token expired")
        try:
            edit = self.interaction.edit_original_response if self.followup is None else self.followup.edit
            await edit(content=content, view=_view(view), allowed_mentions=NO_MENTIONS)
        except discord.NotFound as exc:
            raise PageGone("the interaction token expired or the message is gone") from exc

    async def delete(self) -> None:
        if self.followup is not None and not self.interaction.is_expired():
            failed = "could not delete follow-up %s"
            await landed(self.followup.delete(), failed, self.followup.id, level=logging.DEBUG)


@dataclass(eq=False)
class InteractionPoster:
    """Follow-ups through the token while it lasts, then channel messages replying to the response."""

    _interaction: discord.Interaction[Any]
    _fallback: ChannelPoster
    _expired: bool = False

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
    """The files the tools of an answer returned, in one message right after it; a message Discord
    refuses becomes a one-line note, never a lost answer."""
    shown = reply_files(attachments)
    if shown is None:
        return
    files = [discord.File(io.BytesIO(data), filename=name) for name, data in shown.files]
    if await poster.post(shown.content, files=files) is not None or not shown.files:
        return
    names = ", ".join(escape_text(name) for name, _ in shown.files)
    await poster.post(truncate(f"-# ⚠️ Could not attach {names}.", 2000)[0])


PAGE = "page:"
GONE = "gone"


class TurnPages(PostLedger):
    """A `Poster` of one turn's channel pages that records each one; `earlier_pages` first."""

    def __init__(self, records: PostRecords, event_id: str, poster: ChannelPoster) -> None:
        super().__init__(records, f"discord:{event_id}")
        self.poster = poster
        self._next = 0

    async def earlier_pages(self) -> list[ChannelPage]:
        """The pages an earlier run of this turn left, in order; with some, the poster no longer replies."""
        await self.load()
        numbered = sorted(
            (int(part.removeprefix(PAGE)), part, ref)
            for part, ref in self.known.items()
            if part.startswith(PAGE) and part.removeprefix(PAGE).isdigit()
        )
        self._next = numbered[-1][0] + 1 if numbered else 0
        poster = self.poster
        pages = [
            ChannelPage(
                poster.channel.get_partial_message(int(ref)), poster.guard, poster.channel_id, (self, part)
            )
            for _, part, ref in numbered
            if ref is not None and ref.isdigit()
        ]
        if pages:
            logger.info("%s is answered again: going on in its %d message(s)", self.turn_id, len(pages))
            self.poster.reference = None
        return pages

    async def post(
        self, content: str, *, view: discord.ui.View | None = None, files: Sequence[discord.File] = ()
    ) -> ChannelPage | None:
        page = await self.poster.post(content, view=view, files=files)
        if page is None:
            return None
        part = f"{PAGE}{self._next}"
        self._next += 1
        await self.keep(part, str(page.message.id))
        page.kept = (self, part)
        return page

    async def gone(self, part: str) -> None:
        """A page a second run must not go on in."""
        await self.keep(part, GONE)

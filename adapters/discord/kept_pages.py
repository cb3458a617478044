"""A turn's channel messages, kept by the turn: a job run again goes on in the messages of the run before.

A Discord job runs again when the process running it died or drained in the middle of the answer
(`bot.jobs`). Each message the answer is shown in (its live message, then the pages after it) is
recorded with its id in the posts ledger (`bot.store.posts`, keyed `discord:<event id>`) as soon as
Discord has created it, and marked gone once deleted or found uneditable. A second run starts from
the messages still there: it edits them, as the first run would have, and posts only what is
missing, so the person sees one answer, never a second reply. An answer's files go up once: they
are announced before the upload, and a second run never uploads them again.

What is left: a message Discord created in the moment before its id was recorded (one database
write) is not known to the second run, which posts that page again; the first copy stays as it was.
Discord's message nonces cannot close that gap: they are checked only for a few minutes and say
nothing about a message deleted since.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, InitVar, dataclass

import discord

from adapters.discord.delivery import ChannelGuard
from adapters.discord.pages import ChannelPage, ChannelPoster, PageGone
from bot.agent import PostRecords

logger = logging.getLogger(__name__)

PAGE = "page:"
FILES = "files"
GONE = "gone"


def turn_of(event_id: str) -> str:
    """The posts ledger's name of the turn answering a Discord delivery."""
    return f"discord:{event_id}"


class KeptPage(ChannelPage):
    """A channel page whose end (deleted, or no longer editable) is recorded for a second run."""

    def __init__(
        self,
        message: discord.Message | discord.PartialMessage,
        guard: ChannelGuard,
        channel_id: int,
        *,
        pages: TurnPages,
        part: str,
    ) -> None:
        super().__init__(message, guard, channel_id)
        self._pages = pages
        self._part = part

    async def edit(self, content: str, *, view: discord.ui.View | None = None) -> None:
        try:
            await super().edit(content, view=view)
        except PageGone:
            await self._pages.gone(self._part)
            raise

    async def delete(self) -> None:
        await super().delete()
        await self._pages.gone(self._part)


@dataclass(eq=False)
class TurnPages:
    """A `Poster` of one turn's channel pages that records each one; `load` first."""

    records: PostRecords
    event_id: InitVar[str]
    channel: discord.PartialMessageable
    poster: ChannelPoster
    _: KW_ONLY
    guard: ChannelGuard
    channel_id: int

    def __post_init__(self, event_id: str) -> None:
        self._turn = turn_of(event_id)
        self._known: dict[str, str | None] = {}
        self._next = 0

    async def load(self) -> list[ChannelPage]:
        """The pages an earlier run of this turn left, in order (none for a first run). With some,
        the poster no longer replies: the first of them already does."""
        self._known = await self.records.posts_of(self._turn)
        numbered = sorted(
            (int(part.removeprefix(PAGE)), part, ref)
            for part, ref in self._known.items()
            if part.startswith(PAGE) and part.removeprefix(PAGE).isdigit()
        )
        self._next = numbered[-1][0] + 1 if numbered else 0
        pages: list[ChannelPage] = [
            KeptPage(
                self.channel.get_partial_message(int(ref)),
                self.guard,
                self.channel_id,
                pages=self,
                part=part,
            )
            for _, part, ref in numbered
            if ref is not None and ref.isdigit()
        ]
        if pages:
            logger.info("%s is answered again: going on in its %d message(s)", self._turn, len(pages))
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
        await self._record(part, str(page.message.id))
        return KeptPage(page.message, self.guard, self.channel_id, pages=self, part=part)

    async def gone(self, part: str) -> None:
        """A page a second run must not go on in."""
        await self._record(part, GONE)

    async def take_files(self) -> bool:
        """True once per turn: this run uploads the answer's files; never a second time."""
        if FILES in self._known:
            logger.warning("%s: its files went up (or started to) in an earlier run; not again", self._turn)
            return False
        await self.records.intend_post(self._turn, FILES)
        self._known[FILES] = None
        return True

    async def files_done(self) -> None:
        await self._record(FILES, FILES)

    async def _record(self, part: str, ref: str) -> None:
        self._known[part] = ref
        await self.records.record_post(self._turn, part, ref)

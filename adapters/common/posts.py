"""One turn's posts in the posts ledger (`bot.store.posts`): each part is announced before it is sent
and recorded once it is out, so a turn run again (a restart, a job retried elsewhere) posts nothing twice.
"""

from __future__ import annotations

import logging

from bot.agent import PostRecords

logger = logging.getLogger(__name__)

FILES = "files"  # the part of an answer's files: they go up once per turn


class PostLedger:
    """What the turn the ledger names `turn_id` posted: part → where it is, None while in doubt.
    Without `records` nothing is kept, and every post and upload goes out."""

    def __init__(self, records: PostRecords | None, turn_id: str) -> None:
        self.records = records
        self.turn_id = turn_id
        self.known: dict[str, str | None] = {}

    async def load(self) -> None:
        if self.records is not None:
            self.known = await self.records.posts_of(self.turn_id)

    async def intend(self, part: str) -> None:
        assert self.records is not None
        await self.records.intend_post(self.turn_id, part)
        self.known[part] = None

    async def keep(self, part: str, ref: str) -> None:
        if self.records is not None:
            self.known[part] = ref
            await self.records.record_post(self.turn_id, part, ref)

    async def take_files(self) -> bool:
        """True once per turn: this run uploads the answer's files; never a second time."""
        if self.records is None:
            return True
        if FILES in self.known:
            if self.known[FILES] is None:
                logger.warning(
                    "%s: its files may not all have gone up before the restart; not sending them twice",
                    self.turn_id,
                )
            return False
        await self.intend(FILES)
        return True

    async def files_done(self) -> None:
        await self.keep(FILES, FILES)

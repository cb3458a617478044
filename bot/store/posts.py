"""The posts ledger: which parts of a turn's answer are already out, so an answer goes out once.

A turn answered twice (its process died after posting, or its job was retried elsewhere) edits or
skips what the first attempt posted. Each post is announced before it is sent and completed with
where it landed; one announced but never completed is in doubt, and the front end asks the platform.
"""

from __future__ import annotations

from bot.store.dialect import Ledger, days_ago


class PostLedger(Ledger):
    async def posts_of(self, turn: str) -> dict[str, str | None]:
        """Every part `turn` announced: part → where it landed, or None while in doubt."""
        rows = await self._rows("SELECT part, ref FROM turn_posts WHERE turn = ?", (turn,))
        return {str(row[0]): (str(row[1]) if row[1] is not None else None) for row in rows}

    async def intend_post(self, turn: str, part: str) -> None:
        """Announce a post before sending it (a part announced earlier keeps what it has)."""
        await self._change(
            "INSERT INTO turn_posts (turn, part) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (turn, part),
            inbox=True,
        )

    async def record_post(self, turn: str, part: str, ref: str) -> None:
        """Where a part landed (a channel-and-ts reference, or a marker for uploads)."""
        await self._change(
            "INSERT INTO turn_posts (turn, part, ref) VALUES (?, ?, ?)"
            " ON CONFLICT (turn, part) DO UPDATE SET ref = excluded.ref",
            (turn, part, ref),
            inbox=True,
        )

    async def prune_posts(self, older_than_days: float) -> int:
        """Pruned with the inbox: a turn older than that is never answered again."""
        return await self._change(
            "DELETE FROM turn_posts WHERE created_at < ?", (days_ago(float(older_than_days)),), inbox=True
        )

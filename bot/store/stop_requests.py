"""Stop requests between processes: the stop button pressed in one process for the turn another
process runs (`bot.types.StopBoard`).

A request names the turn that held the conversation when it was pressed, by the id it holds it
under, so it can never stop a later turn of the same thread. The running turn looks for requests
while it works and deletes what it read; one nobody read is deleted by whoever recorded it, or with
the next request once past its expiry.
"""

from __future__ import annotations

import time

from bot.store.dialect import Ledger
from bot.types import ConversationKey

# A request nobody read is gone after this long (whoever recorded it normally deletes it sooner).
STOP_REQUEST_SECONDS = 60.0


class StopLedger(Ledger):
    async def _holder(self, key: ConversationKey) -> str | None:
        """The id of the turn holding `key`'s conversation in any process (the store's turn lock)."""
        raise NotImplementedError

    async def request_stop(self, key: ConversationKey, by: str) -> str | None:
        """Record `by`'s stop for the turn holding `key`'s conversation; its id, or None when no turn
        holds it (then nothing is recorded: a stop never waits for a turn to come)."""
        turn = await self._holder(key)
        if turn is None:
            return None
        now = time.time()
        async with self._write() as db:
            await db.execute("DELETE FROM turn_stops WHERE expires_at < ?", (now,))
            await db.execute(
                "INSERT INTO turn_stops (turn, requested_by, expires_at) VALUES (?, ?, ?)",
                (turn, by, now + STOP_REQUEST_SECONDS),
            )
        return turn

    async def stops_asked(self, turn: str) -> list[str]:
        """Who asked to stop `turn` since it last looked (a read, cheap to repeat; a write only when
        there were requests, which are deleted once read)."""
        rows = await self._rows("SELECT requested_by FROM turn_stops WHERE turn = ?", (turn,))
        if rows:
            await self.drop_stops(turn)
        return [str(row[0]) for row in rows]

    async def stop_pending(self, turn: str) -> bool:
        return await self._first("SELECT 1 FROM turn_stops WHERE turn = ?", (turn,)) is not None

    async def drop_stops(self, turn: str) -> None:
        await self._change("DELETE FROM turn_stops WHERE turn = ?", (turn,))

"""Messages written while a thread's turn waits for a person: kept, and answered after that turn.

Its own ledger because a deferred message is an incoming message waiting its turn, not part of the
parked turn it waits behind. `ApprovalLedger` includes it, so the agent reaches it where it parks.
"""

from __future__ import annotations

import json

from bot.store.ledger import Ledger
from bot.store.rows import KEY_WHERE, incoming_from_json, incoming_to_json, key_from_row, key_params
from bot.types import ConversationKey, Incoming


class DeferredLedger(Ledger):
    """The deferred messages table (mixed into the store through `ApprovalLedger`)."""

    async def defer(self, incoming: Incoming) -> None:
        """Keep a message written while the thread's turn waits; it is answered after that turn."""
        await self._change(
            "INSERT INTO deferred_messages (platform, workspace, channel, thread, incoming)"
            " VALUES (?, ?, ?, ?, ?)",
            (*key_params(incoming.key), json.dumps(incoming_to_json(incoming), ensure_ascii=False)),
        )

    async def next_deferred(self, key: ConversationKey) -> tuple[int, Incoming] | None:
        """The oldest message waiting in this thread, with its id for `drop_deferred`."""
        row = await self._first(
            f"SELECT id, incoming FROM deferred_messages WHERE {KEY_WHERE} ORDER BY id LIMIT 1",
            key_params(key),
        )
        return None if row is None else (int(row[0]), incoming_from_json(json.loads(row[1])))

    async def drop_deferred(self, deferred_id: int) -> None:
        await self._change("DELETE FROM deferred_messages WHERE id = ?", (deferred_id,))

    async def threads_with_deferred(self, platform: str | None = None) -> list[ConversationKey]:
        """Threads (of one platform, if given) where messages wait and no turn is parked any more."""
        rows = await self._rows(
            "SELECT DISTINCT d.platform, d.workspace, d.channel, d.thread FROM deferred_messages d"
            " WHERE NOT EXISTS (SELECT 1 FROM parked_turns p WHERE p.platform = d.platform AND"
            " p.workspace = d.workspace AND p.channel = d.channel AND p.thread = d.thread"
            " AND p.status <> 'done') AND (CAST(? AS TEXT) IS NULL OR d.platform = ?)",
            (platform, platform),
        )
        return [key_from_row(row) for row in rows]

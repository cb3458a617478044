"""Decisions that outlive a turn: remembered approvals ("always allow here") and the audit.

Its own ledger because these are kept apart from any parked turn: a remembered approval holds
while its tool's definition stays the same, and the audit keeps every decision with its
conversation. `ApprovalLedger` includes it, so everything approvals need is in one type.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.ledger import Ledger
from bot.store.rows import C_KEY_WHERE, columns, from_row, key_params
from bot.types import AuditEntry, ConversationKey, RememberedApproval


class DecisionLedger(Ledger):
    """The remembered approvals and audit tables (mixed into the store through `ApprovalLedger`)."""

    # --- remembered approvals ----------------------------------------------------------------------

    async def remember(self, place: str, server: str, tool: str, definition_hash: str, by: str) -> None:
        """Always allow this tool here, while its definition stays `definition_hash`."""
        await self._change(
            "INSERT INTO remembered_approvals (place, server, tool, definition_hash, granted_by)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (place, server, tool) DO UPDATE SET"
            f" definition_hash = excluded.definition_hash, granted_by = excluded.granted_by,"
            f" granted_at = {self._sql.now}",
            (place, server, tool, definition_hash, by),
        )

    async def remembered(self, place: str, server: str, tool: str) -> str | None:
        """The definition hash this tool was always-allowed with here, if it was."""
        row = await self._first(
            "SELECT definition_hash FROM remembered_approvals WHERE place = ? AND server = ? AND tool = ?",
            (place, server, tool),
        )
        return str(row[0]) if row else None

    async def remembered_approvals(self, place: str | None = None) -> list[RememberedApproval]:
        """Every remembered approval (of one place, if given), newest first."""
        rows = await self._rows(
            f"SELECT {columns(RememberedApproval)} FROM remembered_approvals"
            " WHERE CAST(? AS TEXT) IS NULL OR place = ? ORDER BY granted_at DESC",
            (place, place),
        )
        return [from_row(RememberedApproval, row) for row in rows]

    async def revoke(self, place: str, server: str, tool: str) -> bool:
        """Forget a remembered approval; False if there was none."""
        deleted = await self._change(
            "DELETE FROM remembered_approvals WHERE place = ? AND server = ? AND tool = ?",
            (place, server, tool),
        )
        return deleted == 1

    # --- audit -------------------------------------------------------------------------------------

    async def record_audit(self, key: ConversationKey, entries: Sequence[AuditEntry]) -> None:
        """Keep these decisions with the thread's active conversation."""
        if not entries:
            return
        async with self._write() as db:
            conversation = await self._conversation_of(db, key)
            await db.executemany(
                "INSERT INTO audit (conversation_id, who, place, server, tool, call_id, arguments_hash,"
                " outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (conversation, e.who, e.place, e.server, e.tool, e.call_id, e.arguments_hash, e.outcome)
                    for e in entries
                ],
            )

    async def audit_log(self, key: ConversationKey) -> list[AuditEntry]:
        """The decisions of the thread's active conversation, oldest first."""
        rows = await self._rows(
            f"SELECT {columns(AuditEntry, 'a.')} FROM audit a JOIN conversations c"
            f" ON c.id = a.conversation_id WHERE c.archived_at IS NULL AND {C_KEY_WHERE} ORDER BY a.id",
            key_params(key),
        )
        return [from_row(AuditEntry, row) for row in rows]

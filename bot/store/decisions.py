"""Decisions that outlive a turn: remembered approvals ("always allow here") and the audit.

Its own ledger because these are kept apart from any parked turn: a remembered approval holds
while its tool's definition stays the same, and the audit keeps every decision with its
conversation. `ApprovalLedger` includes it, so everything approvals need is in one type.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.dialect import Connection
from bot.store.ledger import Ledger
from bot.store.rows import KEY_WHERE, audit_from_row, key_params
from bot.types import (
    AuditEntry,
    ConversationKey,
    RememberedApproval,
)


class DecisionLedger(Ledger):
    """The remembered approvals and audit tables (mixed into the store through `ApprovalLedger`)."""

    async def _conversation_of(self, db: Connection, key: ConversationKey) -> int:
        raise NotImplementedError

    # --- remembered approvals ----------------------------------------------------------------------

    async def remember(self, place: str, server: str, tool: str, definition_hash: str, by: str) -> None:
        """Always allow this tool here, while its definition stays `definition_hash`."""
        async with self._write() as db:
            await db.execute(
                "INSERT INTO remembered_approvals (place, server, tool, definition_hash, granted_by)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (place, server, tool) DO UPDATE SET"
                f" definition_hash = excluded.definition_hash, granted_by = excluded.granted_by,"
                f" granted_at = {self._sql.now}",
                (place, server, tool, definition_hash, by),
            )

    async def remembered(self, place: str, server: str, tool: str) -> str | None:
        """The definition hash this tool was always-allowed with here, if it was."""
        async with self._read() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT definition_hash FROM remembered_approvals WHERE place = ? AND server = ?"
                    " AND tool = ?",
                    (place, server, tool),
                )
            )
        return str(rows[0][0]) if rows else None

    async def remembered_approvals(self, place: str | None = None) -> list[RememberedApproval]:
        """Every remembered approval (of one place, if given), newest first."""
        where, params = ("WHERE place = ?", (place,)) if place is not None else ("", ())
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT place, server, tool, definition_hash, granted_by, granted_at"
                f" FROM remembered_approvals {where} ORDER BY granted_at DESC",
                params,
            )
        return [
            RememberedApproval(
                place=r[0], server=r[1], tool=r[2], definition_hash=r[3], granted_by=r[4], granted_at=r[5]
            )
            for r in rows
        ]

    async def revoke(self, place: str, server: str, tool: str) -> bool:
        """Forget a remembered approval; False if there was none."""
        async with self._write() as db:
            cursor = await db.execute(
                "DELETE FROM remembered_approvals WHERE place = ? AND server = ? AND tool = ?",
                (place, server, tool),
            )
            return cursor.rowcount == 1

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
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT a.at, a.who, a.place, a.server, a.tool, a.call_id, a.arguments_hash, a.outcome"
                " FROM audit a JOIN conversations c ON c.id = a.conversation_id"
                f" WHERE c.archived_at IS NULL AND c.{KEY_WHERE.replace(' AND ', ' AND c.')} ORDER BY a.id",
                key_params(key),
            )
        return [audit_from_row(row) for row in rows]

"""Parked turns and the calls they wait on, remembered approvals, the audit, and the messages that
wait behind a parked turn.

A waiting turn is written here whole and its task ends: nothing is held while the person thinks.
Every state change is one conditional UPDATE, so a replayed or concurrent click changes nothing and
exactly one process claims a turn to resume it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.policy.scopes import place_id
from bot.store.conversations import ConversationLedger
from bot.store.dialect import Connection
from bot.store.inputs import ParkedCallQuestions, insert_input
from bot.store.rows import (
    C_KEY_WHERE,
    KEY_WHERE,
    columns,
    from_row,
    incoming_from_json,
    incoming_to_json,
    key_from_row,
    key_params,
    message_from_json,
    message_to_json,
    to_json,
)
from bot.store.sign_ins import SignInLedger, SignInWait
from bot.types import (
    ApprovalPrompt,
    AuditEntry,
    CallDecision,
    CallSummary,
    ChatMessage,
    ConversationKey,
    Incoming,
    PendingCall,
    RememberedApproval,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedTurn:
    """Everything a parked turn needs to go on, as claimed for resuming."""

    request_id: str
    incoming: Incoming
    answer: ChatMessage
    done: tuple[ChatMessage, ...]
    calls: tuple[PendingCall, ...]
    rounds_used: int


class ApprovalLedger(ConversationLedger, SignInLedger):
    async def park(
        self,
        *,
        request_id: str,
        incoming: Incoming,
        answer: ChatMessage,
        done: Sequence[ChatMessage],
        calls: Sequence[tuple[PendingCall, str]],
        rounds_used: int,
        expires_at: float,
        questions: Sequence[ParkedCallQuestions] = (),
        sign_ins: Sequence[SignInWait] = (),
        now: float = 0.0,
    ) -> None:
        """Its calls (with their tool's definition hash) wait for a decision, or for `questions`' answers."""
        async with self._write() as db:
            await db.execute(
                "INSERT INTO parked_turns (id, platform, workspace, channel, thread, requester, place,"
                " incoming, answer, done_results, rounds_used, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    request_id,
                    *key_params(incoming.key),
                    incoming.user_id,
                    place_id(incoming.where()),
                    to_json(incoming_to_json(incoming)),
                    to_json(message_to_json(answer)),
                    to_json([message_to_json(m) for m in done]),
                    rounds_used,
                    expires_at,
                ),
            )
            await db.executemany(
                "INSERT INTO pending_calls (request_id, call_id, position, server, tool, arguments,"
                " call_hash, definition_hash, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        request_id,
                        call.call_id,
                        position,
                        call.server,
                        call.tool,
                        to_json(call.arguments),
                        call.call_hash,
                        definition,
                        to_json(call.summary.to_json()) if call.summary is not None else None,
                    )
                    for position, (call, definition) in enumerate(calls)
                ],
            )
            # In this transaction: a call is never left looking like one that waits for approval.
            for asked in questions:
                await db.execute(
                    "INSERT INTO input_waits (request_id, call_id, request_state) VALUES (?, ?, ?)",
                    (request_id, asked.call_id, asked.request_state),
                )
                for q in asked.questions:
                    await insert_input(db, q.request, q.schema, now, (request_id, asked.call_id, q.key))
            await db.executemany(
                "INSERT INTO sign_in_waits (request_id, call_id, server, person) VALUES (?, ?, ?, ?)",
                [(request_id, w.call_id, w.server, w.person) for w in sign_ins],
            )

    async def prompt(self, request_id: str) -> tuple[ApprovalPrompt, str] | None:
        """The request as an approval message shows it, with its status (waiting/resuming/done)."""
        async with self._read() as db:
            return await _load_prompt(db, request_id, questions=False)

    async def parked_by(self, key: ConversationKey, event_id: str | None = None) -> str | None:
        """The request of this thread's turn still parked or resuming (started by `event_id`, if given)."""
        row = await self._first(
            f"SELECT id FROM parked_turns WHERE {KEY_WHERE} AND status <> 'done' AND (CAST(? AS TEXT) IS NULL"
            f" OR {self._sql.incoming_event_id} = ?) ORDER BY rowid LIMIT 1",
            (*key_params(key), event_id, event_id),
        )
        return None if row is None else str(row[0])

    waiting_in = parked_by

    async def set_message_ref(self, request_id: str, ref: str) -> None:
        """Where the approval message is, so the process that resumes can update it."""
        await self._change("UPDATE parked_turns SET message_ref = ? WHERE id = ?", (ref, request_id))

    async def decide(
        self, request_id: str, call_ids: Sequence[str], status: CallDecision, by: str, now: float
    ) -> list[str]:
        """Returns the calls this changed: only pending calls of a waiting, unexpired request."""
        changed: list[str] = []
        async with self._write() as db:
            for call_id in call_ids:
                cursor = await db.execute(
                    f"UPDATE pending_calls SET status = ?, decided_by = ?, decided_at = {self._sql.now}"
                    " WHERE request_id = ? AND call_id = ? AND status = 'pending' AND EXISTS ("
                    "  SELECT 1 FROM parked_turns p WHERE p.id = request_id AND p.status = 'waiting'"
                    "  AND p.expires_at > ?)",
                    (status, by, request_id, call_id, now),
                )
                if cursor.rowcount == 1:
                    changed.append(call_id)
        return changed

    async def expire_due(self, now: float, platform: str | None = None) -> list[str]:
        """Returns the requests expired now; each front end sweeps its own, as it updates their message."""
        async with self._write() as db:
            rows = await db.execute_fetchall(
                "SELECT DISTINCT p.id FROM parked_turns p JOIN pending_calls c ON c.request_id = p.id"
                " WHERE p.status = 'waiting' AND p.expires_at <= ? AND c.status = 'pending'"
                " AND (CAST(? AS TEXT) IS NULL OR p.platform = ?)",
                (now, platform, platform),
            )
            await self._close_calls(db, rows, by="expiry")
        return [str(row[0]) for row in rows]

    async def claim(self, request_id: str, now: float) -> ParkedTurn | None:
        """None if still open or done. The caller holds the thread's turn lock, so one still `resuming`
        was left by a stopped process."""
        async with self._write() as db:
            claimed = await db.execute_fetchall(
                "UPDATE parked_turns SET status = 'resuming', claimed_at = ? WHERE id = ?"
                " AND status IN ('waiting', 'resuming') AND NOT EXISTS"
                " (SELECT 1 FROM pending_calls WHERE request_id = ? AND status = 'pending')"
                " RETURNING incoming, answer, done_results, rounds_used",
                (now, request_id, request_id),
            )
            if not claimed:
                return None
            incoming, answer, done, rounds_used = claimed[0]
            loaded = await _load_prompt(db, request_id)
        assert loaded is not None
        return ParkedTurn(
            request_id=request_id,
            incoming=incoming_from_json(json.loads(incoming)),
            answer=message_from_json(json.loads(answer)),
            done=tuple(message_from_json(m) for m in json.loads(done)),
            calls=loaded[0].calls,
            rounds_used=int(rounds_used),
        )

    async def finish_parked(
        self, request_id: str, key: ConversationKey, round_messages: Sequence[ChatMessage]
    ) -> None:
        async with self._write() as db:
            await self._insert_messages(db, key, round_messages)
            await db.execute("UPDATE parked_turns SET status = 'done' WHERE id = ?", (request_id,))

    async def release_claim(self, request_id: str) -> None:
        """A resume that failed gives its request back, to be resumed again."""
        await self._change(
            "UPDATE parked_turns SET status = 'waiting', claimed_at = NULL"
            " WHERE id = ? AND status = 'resuming'",
            (request_id,),
        )

    async def close_parked(self, key: ConversationKey) -> list[str]:
        """A thread was reset: its parked turns end, their open calls counted as not approved."""
        async with self._write() as db:
            rows = await db.execute_fetchall(
                f"SELECT id FROM parked_turns WHERE {KEY_WHERE} AND status <> 'done'", key_params(key)
            )
            await self._close_calls(db, rows, by="reset")
            await db.executemany("UPDATE parked_turns SET status = 'done' WHERE id = ?", rows)
        return [str(row[0]) for row in rows]

    async def _close_calls(self, db: Connection, requests: Sequence[Any], *, by: str) -> None:
        """The open calls of these requests (rows of their id) end as not approved."""
        await db.executemany(
            f"UPDATE pending_calls SET status = 'expired', decided_by = ?, decided_at = {self._sql.now}"
            " WHERE request_id = ? AND status = 'pending'",
            [(by, row[0]) for row in requests],
        )

    async def ready_requests(self, platform: str | None = None, *, resuming: bool = False) -> list[str]:
        """Fully decided, never resumed (a process stopped or failed first); or, with `resuming`, left
        resuming by a stopped process."""
        statuses = "('waiting', 'resuming')" if resuming else "('waiting')"
        rows = await self._rows(
            f"SELECT id FROM parked_turns p WHERE status IN {statuses} AND NOT EXISTS"
            " (SELECT 1 FROM pending_calls c WHERE c.request_id = p.id AND c.status = 'pending')"
            " AND (CAST(? AS TEXT) IS NULL OR p.platform = ?) ORDER BY rowid",
            (platform, platform),
        )
        return [str(row[0]) for row in rows]

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
        rows = await self._rows(
            f"SELECT {columns(RememberedApproval)} FROM remembered_approvals"
            " WHERE CAST(? AS TEXT) IS NULL OR place = ? ORDER BY granted_at DESC",
            (place, place),
        )
        return [from_row(RememberedApproval, row) for row in rows]

    async def revoke(self, place: str, server: str, tool: str) -> bool:
        deleted = await self._change(
            "DELETE FROM remembered_approvals WHERE place = ? AND server = ? AND tool = ?",
            (place, server, tool),
        )
        return deleted == 1

    # --- audit -------------------------------------------------------------------------------------

    async def record_audit(self, key: ConversationKey, entries: Sequence[AuditEntry]) -> None:
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
        rows = await self._rows(
            f"SELECT {columns(AuditEntry, 'a.')} FROM audit a JOIN conversations c"
            f" ON c.id = a.conversation_id WHERE c.archived_at IS NULL AND {C_KEY_WHERE} ORDER BY a.id",
            key_params(key),
        )
        return [from_row(AuditEntry, row) for row in rows]

    # --- messages that wait behind a parked turn ---------------------------------------------------

    async def defer(self, incoming: Incoming) -> None:
        """Keep a message written while the thread's turn waits; it is answered after that turn."""
        await self._change(
            "INSERT INTO deferred_messages (platform, workspace, channel, thread, incoming)"
            " VALUES (?, ?, ?, ?, ?)",
            (*key_params(incoming.key), to_json(incoming_to_json(incoming))),
        )

    async def next_deferred(self, key: ConversationKey) -> tuple[int, Incoming] | None:
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


async def _load_prompt(
    db: Connection, request_id: str, *, questions: bool = True
) -> tuple[ApprovalPrompt, str] | None:
    """Without `questions`, only the calls waiting for approval: the others are shown as questions."""
    rows = await db.execute_fetchall(
        "SELECT platform, workspace, channel, thread, requester, answer, expires_at, message_ref, status,"
        " place FROM parked_turns WHERE id = ?",
        (request_id,),
    )
    if not rows:
        return None
    *key, requester, answer, expires_at, message_ref, status, place = rows[0]
    call_rows = await db.execute_fetchall(
        f"SELECT {columns(PendingCall)} FROM pending_calls c"
        f" WHERE request_id = ? AND (? OR NOT {_WAITS_ELSEWHERE}) ORDER BY position",
        (request_id, questions),
    )
    calls = tuple(
        from_row(PendingCall, (*c[:3], json.loads(c[3]), *c[4:-1], _summary(c[-1]))) for c in call_rows
    )
    reason = (message_from_json(json.loads(answer)).content or "").strip()
    questions_open = not questions and bool(await db.execute_fetchall(_QUESTIONS_OPEN, (request_id,)))
    shown = (requester, place, calls, reason, float(expires_at), message_ref, questions_open)
    return from_row(ApprovalPrompt, shown, request_id=request_id, key=key_from_row(key)), str(status)


def _summary(stored: str | None) -> CallSummary | None:
    return CallSummary.from_json(json.loads(stored)) if stored else None


# A call `c` that waits for answers to its server's questions, or for a sign-in, not for approval.
_WAITS_ELSEWHERE = (
    "(EXISTS (SELECT 1 FROM input_waits w WHERE w.request_id = c.request_id AND w.call_id = c.call_id)"
    " OR EXISTS (SELECT 1 FROM sign_in_waits s WHERE s.request_id = c.request_id AND s.call_id = c.call_id))"
)
# A parked turn's calls still waiting for answers or a sign-in.
_QUESTIONS_OPEN = (
    f"SELECT 1 FROM pending_calls c WHERE c.request_id = ? AND c.status = 'pending' AND {_WAITS_ELSEWHERE}"
    " LIMIT 1"
)

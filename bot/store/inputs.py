"""Requests for input servers made during calls (MCP elicitation), and their answers.

The process whose call waits keeps its request alive (`alive_at`) and watches the row; any process
may write the answer, once: every change is one conditional UPDATE on an open row, so a double
submit, a replayed click or an answer racing the expiry changes nothing the second time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.forms import FormError, form_from_schema
from bot.store.dialect import Connection
from bot.store.ledger import Ledger
from bot.types import ConversationKey, InputMode, InputRequest, InputStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredInput:
    """A request as stored: what was shown, where it stands, and when its waiter last said it lives."""

    request: InputRequest
    status: InputStatus
    content: dict[str, Any] | None
    alive_at: float
    # Set for a question of a parked call: its turn waits in the store, not in a process.
    parked_id: str | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedQuestion:
    """One question of a parked call: the request as shown, its schema, the server's key for it,
    and its status ("declined" for one nerve refused to show)."""

    request: InputRequest
    schema: dict[str, Any] | None
    key: str
    status: InputStatus = "open"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedCallQuestions:
    """A parked call's questions and the server's opaque state to send back with their answers."""

    call_id: str
    request_state: str | None
    questions: tuple[ParkedQuestion, ...]


async def insert_input(
    db: Connection,
    request: InputRequest,
    schema: dict[str, Any] | None,
    now: float,
    status: InputStatus = "open",
    *,
    parked_id: str | None = None,
    call_id: str | None = None,
    input_key: str | None = None,
) -> None:
    key = request.key
    await db.execute(
        "INSERT INTO input_requests (id, platform, workspace, channel, thread, user_id, server,"
        " tools, message, mode, schema, url, refused, status, expires_at, alive_at, parked_id, call_id,"
        " input_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            request.request_id,
            key.platform,
            key.workspace,
            key.channel,
            key.thread,
            request.user_id,
            request.server,
            json.dumps(list(request.tools), ensure_ascii=False),
            request.message,
            request.mode,
            json.dumps(schema, ensure_ascii=False) if schema is not None else None,
            request.url,
            request.refused,
            status,
            request.expires_at,
            now,
            parked_id,
            call_id,
            input_key,
        ),
    )


async def insert_parked_questions(
    db: Connection, parked_id: str, calls: Sequence[ParkedCallQuestions], now: float
) -> None:
    """Write a parked turn's questions (in the parking transaction: a call is never left looking
    like one that waits for approval)."""
    for call in calls:
        await db.execute(
            "INSERT INTO input_waits (request_id, call_id, request_state) VALUES (?, ?, ?)",
            (parked_id, call.call_id, call.request_state),
        )
        for question in call.questions:
            await insert_input(
                db,
                question.request,
                question.schema,
                now,
                question.status,
                parked_id=parked_id,
                call_id=call.call_id,
                input_key=question.key,
            )


class InputLedger(Ledger):
    """The input-request table of the conversation store (mixed into the store, `bot.store.base`)."""

    async def open_input(
        self, request: InputRequest, schema: dict[str, Any] | None, now: float, status: InputStatus = "open"
    ) -> None:
        """Record a request as shown (`status` "declined" for one nerve refused to show)."""
        async with self._write() as db:
            await insert_input(db, request, schema, now, status)

    async def stored_input(self, request_id: str) -> StoredInput | None:
        async with self._read() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT platform, workspace, channel, thread, user_id, server, tools, message, mode,"
                    " schema, url, refused, status, content, expires_at, alive_at, parked_id, call_id,"
                    " message_ref FROM input_requests WHERE id = ?",
                    (request_id,),
                )
            )
        if not rows:
            return None
        row = rows[0]
        schema = json.loads(row[9]) if row[9] is not None else None
        form = None
        if schema is not None:
            try:
                form = form_from_schema(schema)
            except FormError:
                form = None
        mode: InputMode = "url" if row[8] == "url" else "form"
        request = InputRequest(
            request_id=request_id,
            key=ConversationKey(platform=row[0], workspace=row[1], channel=row[2], thread=row[3]),
            user_id=row[4],
            server=row[5],
            tools=tuple(json.loads(row[6])),
            message=row[7],
            mode=mode,
            form=form,
            url=row[10],
            refused=row[11],
            expires_at=float(row[14]),
            message_ref=row[18],
        )
        content = json.loads(row[13]) if row[13] is not None else None
        return StoredInput(
            request=request,
            status=row[12],
            content=content,
            alive_at=float(row[15]),
            parked_id=row[16],
            call_id=row[17],
        )

    async def open_parked_questions(self, parked_id: str) -> list[InputRequest]:
        """A parked turn's questions still waiting for their answer, in the order they were asked
        (so a front end that stopped before they were answered can ask them again)."""
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT id FROM input_requests WHERE parked_id = ? AND status = 'open' ORDER BY rowid",
                (parked_id,),
            )
        found = [await self.stored_input(str(request_id)) for (request_id,) in rows]
        return [stored.request for stored in found if stored is not None and stored.status == "open"]

    async def settle_input(
        self,
        request_id: str,
        status: InputStatus,
        *,
        by: str,
        content: dict[str, Any] | None = None,
        stale_before: float | None = None,
    ) -> bool:
        """Answer an open request; False when it was not open (answered, expired, ended) — or, with
        `stale_before`, when its waiter is still alive (only a stopped waiter's request is ended)."""
        async with self._write() as db:
            cursor = await db.execute(
                "UPDATE input_requests SET status = ?, content = ?, answered_by = ?,"
                f" answered_at = {self._sql.now} WHERE id = ? AND status = 'open'"
                " AND (CAST(? AS DOUBLE PRECISION) IS NULL OR alive_at < ?)",
                (
                    status,
                    json.dumps(content, ensure_ascii=False) if content is not None else None,
                    by,
                    request_id,
                    stale_before,
                    stale_before,
                ),
            )
            return cursor.rowcount == 1

    async def set_input_message_ref(self, request_id: str, ref: str) -> None:
        async with self._write() as db:
            await db.execute("UPDATE input_requests SET message_ref = ? WHERE id = ?", (ref, request_id))

    async def keep_inputs_alive(self, request_ids: list[str], now: float) -> None:
        if not request_ids:
            return
        marks = ", ".join("?" for _ in request_ids)
        async with self._write() as db:
            await db.execute(
                f"UPDATE input_requests SET alive_at = ? WHERE status = 'open' AND id IN ({marks})",
                (now, *request_ids),
            )

    async def settle_parked_call(self, parked_id: str, call_id: str, by: str) -> bool:
        """A parked call whose questions are all answered may run: True when that leaves its turn
        with nothing more to wait for (it can be resumed)."""
        async with self._write() as db:
            open_rows = await db.execute_fetchall(
                "SELECT 1 FROM input_requests"
                " WHERE parked_id = ? AND call_id = ? AND status = 'open' LIMIT 1",
                (parked_id, call_id),
            )
            if list(open_rows):
                return False
            await db.execute(
                f"UPDATE pending_calls SET status = 'approved', decided_by = ?, decided_at = {self._sql.now}"
                " WHERE request_id = ? AND call_id = ? AND status = 'pending'",
                (by, parked_id, call_id),
            )
            waiting = await db.execute_fetchall(
                "SELECT 1 FROM pending_calls WHERE request_id = ? AND status = 'pending' LIMIT 1",
                (parked_id,),
            )
            return not list(waiting)

    async def parked_answers(
        self, parked_id: str, call_id: str
    ) -> tuple[str | None, list[tuple[str, InputStatus, InputMode, dict[str, Any] | None]]] | None:
        """A parked call's state and its questions' answers (key, status, mode, content); None when
        the call did not wait for questions."""
        async with self._read() as db:
            waits = list(
                await db.execute_fetchall(
                    "SELECT request_state FROM input_waits WHERE request_id = ? AND call_id = ?",
                    (parked_id, call_id),
                )
            )
            if not waits:
                return None
            rows = await db.execute_fetchall(
                "SELECT input_key, status, mode, content FROM input_requests"
                " WHERE parked_id = ? AND call_id = ? ORDER BY rowid",
                (parked_id, call_id),
            )
        answers: list[tuple[str, InputStatus, InputMode, dict[str, Any] | None]] = []
        for r in rows:
            mode: InputMode = "url" if r[2] == "url" else "form"
            answers.append((str(r[0]), r[1], mode, json.loads(r[3]) if r[3] else None))
        return waits[0][0], answers

    async def close_parked_questions(self, parked_id: str, call_id: str) -> list[InputRequest]:
        """A parked call goes on: its questions nobody answered are closed as expired."""
        async with self._read() as db:
            rows = await db.execute_fetchall(
                "SELECT id FROM input_requests WHERE parked_id = ? AND call_id = ? AND status = 'open'",
                (parked_id, call_id),
            )
        closed = []
        for (request_id,) in rows:
            if await self.settle_input(str(request_id), "expired", by="expiry"):
                stored = await self.stored_input(str(request_id))
                if stored is not None:
                    closed.append(stored.request)
        return closed

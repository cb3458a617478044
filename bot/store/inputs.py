"""Requests for input servers made during calls (MCP elicitation), and their answers.

The process whose call waits keeps its request alive (`alive_at`) and watches the row; any process
may write the answer, once: every change is one conditional UPDATE on an open row, so a double
submit, a replayed click or an answer racing the expiry changes nothing the second time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from bot.forms import FormError, form_from_schema
from bot.store.dialect import Connection, Ledger
from bot.store.rows import from_row, key_from_row, key_params, to_json
from bot.types import InputMode, InputRequest, InputStatus


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
    """One question of a parked call; `key` is the server's."""

    request: InputRequest
    schema: dict[str, Any] | None
    key: str


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
    parked: tuple[str | None, str | None, str | None] = (None, None, None),
) -> None:
    """Shown "open", or "declined" when nerve refused to show it; `parked`, for a question of a parked
    call: its turn's id, its call's, and the server's key."""
    await db.execute(
        "INSERT INTO input_requests (id, platform, workspace, channel, thread, user_id, server,"
        " tools, message, mode, schema, url, refused, status, expires_at, alive_at, parked_id, call_id,"
        " input_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            request.request_id,
            *key_params(request.key),
            request.user_id,
            request.server,
            to_json(list(request.tools)),
            request.message,
            request.mode,
            to_json(schema),
            request.url,
            request.refused,
            "declined" if request.refused is not None else "open",
            request.expires_at,
            now,
            *parked,
        ),
    )


class InputLedger(Ledger):
    async def open_input(self, request: InputRequest, schema: dict[str, Any] | None, now: float) -> None:
        """Record a request as shown ("declined" for one nerve refused to show)."""
        async with self._write() as db:
            await insert_input(db, request, schema, now)

    async def stored_input(self, request_id: str) -> StoredInput | None:
        found = await self._inputs("id = ?", (request_id,))
        return found[0] if found else None

    async def open_parked_questions(self, parked_id: str) -> list[InputRequest]:
        """Still unanswered, in order: a front end that stopped before their answer asks them again."""
        found = await self._inputs("parked_id = ? AND status = 'open' ORDER BY rowid", (parked_id,))
        return [stored.request for stored in found]

    async def _inputs(self, where: str, params: tuple[str, ...]) -> list[StoredInput]:
        rows = await self._rows(
            "SELECT id, platform, workspace, channel, thread, user_id, server, tools, message, mode, schema,"
            " url, refused, expires_at, message_ref, status, content, alive_at, parked_id, call_id"
            f" FROM input_requests WHERE {where}",
            params,
        )
        return [_stored(row) for row in rows]

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
        changed = await self._change(
            "UPDATE input_requests SET status = ?, content = ?, answered_by = ?,"
            f" answered_at = {self._sql.now} WHERE id = ? AND status = 'open'"
            " AND (CAST(? AS DOUBLE PRECISION) IS NULL OR alive_at < ?)",
            (status, to_json(content), by, request_id, stale_before, stale_before),
        )
        return changed == 1

    async def set_input_message_ref(self, request_id: str, ref: str) -> None:
        await self._change("UPDATE input_requests SET message_ref = ? WHERE id = ?", (ref, request_id))

    async def keep_inputs_alive(self, request_ids: list[str], now: float) -> None:
        if not request_ids:
            return
        marks = ", ".join("?" for _ in request_ids)
        await self._change(
            f"UPDATE input_requests SET alive_at = ? WHERE status = 'open' AND id IN ({marks})",
            (now, *request_ids),
        )

    async def settle_parked_call(self, parked_id: str, call_id: str, by: str) -> bool:
        """A parked call whose questions are all answered may run: True when its turn can be resumed."""
        async with self._write() as db:
            if await db.execute_fetchall(
                "SELECT 1 FROM input_requests WHERE parked_id = ? AND call_id = ? AND status = 'open'"
                " LIMIT 1",
                (parked_id, call_id),
            ):
                return False
            await db.execute(
                f"UPDATE pending_calls SET status = 'approved', decided_by = ?, decided_at = {self._sql.now}"
                " WHERE request_id = ? AND call_id = ? AND status = 'pending'",
                (by, parked_id, call_id),
            )
            return not await db.execute_fetchall(
                "SELECT 1 FROM pending_calls WHERE request_id = ? AND status = 'pending' LIMIT 1",
                (parked_id,),
            )

    async def parked_answers(
        self, parked_id: str, call_id: str
    ) -> tuple[str | None, list[tuple[str, InputStatus, InputMode, dict[str, Any] | None]]] | None:
        """The call's state and its questions' (key, status, mode, content); None if it asked none."""
        wait = await self._first(
            "SELECT request_state FROM input_waits WHERE request_id = ? AND call_id = ?", (parked_id, call_id)
        )
        if wait is None:
            return None
        rows = await self._rows(
            "SELECT input_key, status, mode, content FROM input_requests"
            " WHERE parked_id = ? AND call_id = ? ORDER BY rowid",
            (parked_id, call_id),
        )
        return wait[0], [
            (str(k), status, _mode(mode), json.loads(c) if c else None) for k, status, mode, c in rows
        ]

    async def close_parked_questions(self, parked_id: str, call_id: str) -> list[InputRequest]:
        """A parked call goes on: its questions nobody answered are closed as expired."""
        rows = await self._rows(
            "SELECT id FROM input_requests WHERE parked_id = ? AND call_id = ? AND status = 'open'",
            (parked_id, call_id),
        )
        closed = []
        for (request_id,) in rows:
            if await self.settle_input(str(request_id), "expired", by="expiry"):
                closed += [stored.request for stored in await self._inputs("id = ?", (str(request_id),))]
        return closed


def _mode(stored: str) -> InputMode:
    return "url" if stored == "url" else "form"


def _stored(row: Sequence[Any]) -> StoredInput:
    request_id, *key, user_id, server, tools, message, mode, schema, url, refused, expires_at, ref = row[:15]
    form = None
    with suppress(FormError):
        form = form_from_schema(json.loads(schema)) if schema is not None else None
    shown = (user_id, server, tuple(json.loads(tools)), message, _mode(mode), form, url, refused)
    request = from_row(InputRequest, (request_id, key_from_row(key), *shown, float(expires_at), ref))
    status, content, alive_at = row[15:18]
    content = json.loads(content) if content is not None else None
    return from_row(StoredInput, (request, status, content, float(alive_at), *row[18:]))

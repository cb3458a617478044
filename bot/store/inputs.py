"""Requests for input servers made during calls (MCP elicitation), and their answers.

The process whose call waits keeps its request alive (`alive_at`) and watches the row; any process
may write the answer, once: every change is one conditional UPDATE on an open row, so a double
submit, a replayed click or an answer racing the expiry changes nothing the second time.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiosqlite

from bot.forms import FormError, form_from_schema
from bot.types import ConversationKey, InputMode, InputRequest, InputStatus

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredInput:
    """A request as stored: what was shown, where it stands, and when its waiter last said it lives."""

    request: InputRequest
    status: InputStatus
    content: dict[str, Any] | None
    alive_at: float


class InputLedger:
    """The input-request table of the conversation store (mixed into `SQLiteStore`)."""

    def _read(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        raise NotImplementedError

    def _write(self) -> AbstractAsyncContextManager[aiosqlite.Connection]:
        raise NotImplementedError

    async def open_input(
        self, request: InputRequest, schema: dict[str, Any] | None, now: float, status: InputStatus = "open"
    ) -> None:
        """Record a request as shown (`status` "declined" for one nerve refused to show)."""
        key = request.key
        async with self._write() as db:
            await db.execute(
                "INSERT INTO input_requests (id, platform, workspace, channel, thread, user_id, server,"
                " tools, message, mode, schema, url, refused, status, expires_at, alive_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                ),
            )

    async def stored_input(self, request_id: str) -> StoredInput | None:
        async with self._read() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT platform, workspace, channel, thread, user_id, server, tools, message, mode,"
                    " schema, url, refused, status, content, expires_at, alive_at"
                    " FROM input_requests WHERE id = ?",
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
        )
        content = json.loads(row[13]) if row[13] is not None else None
        return StoredInput(request=request, status=row[12], content=content, alive_at=float(row[15]))

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
                f"UPDATE input_requests SET status = ?, content = ?, answered_by = ?, answered_at = {_NOW}"
                " WHERE id = ? AND status = 'open' AND (? IS NULL OR alive_at < ?)",
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

    async def keep_inputs_alive(self, request_ids: list[str], now: float) -> None:
        if not request_ids:
            return
        marks = ", ".join("?" for _ in request_ids)
        async with self._write() as db:
            await db.execute(
                f"UPDATE input_requests SET alive_at = ? WHERE status = 'open' AND id IN ({marks})",
                (now, *request_ids),
            )

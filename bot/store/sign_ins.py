"""Sign-ins to remote MCP servers: people's tokens, nerve's registrations, flows under way, and the
parked calls that wait for a person to sign in.

Values are sealed by `bot.mcp.auth.vault.Vault` before they get here; this layer stores bytes. Taking a
started sign-in deletes it in the same statement, so a `state` is good once, in any process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.store.dialect import Ledger
from bot.store.rows import columns, from_row, key_from_row, key_params
from bot.types import ConversationKey


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredTokens:
    server: str
    person: str
    issuer: str
    secret: bytes
    scope: str | None
    updated_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StartedSignIn:
    """An authorization under way, as its callback finds it."""

    state: str
    server: str
    person: str
    key: ConversationKey | None
    secret: bytes
    expires_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SignInWait:
    """A parked call waiting for `person` to sign in to `server`."""

    call_id: str
    server: str
    person: str


class SignInLedger(Ledger):
    async def save_tokens(
        self, *, server: str, person: str, issuer: str, secret: bytes, scope: str | None, now: float
    ) -> None:
        await self._change(
            "INSERT INTO oauth_tokens (server, person, issuer, secret, scope, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, person) DO UPDATE SET"
            " issuer = excluded.issuer, secret = excluded.secret, scope = excluded.scope,"
            " updated_at = excluded.updated_at",
            (server, person, issuer, secret, scope, now),
        )

    async def stored_tokens(self, server: str, person: str) -> StoredTokens | None:
        found = await self._tokens("server = ? AND person = ?", (server, person))
        return found[0] if found else None

    async def forget_tokens(self, server: str, person: str) -> bool:
        deleted = await self._change(
            "DELETE FROM oauth_tokens WHERE server = ? AND person = ?", (server, person)
        )
        return deleted > 0

    async def people_connected(self, server: str) -> list[str]:
        rows = await self._rows(
            "SELECT person FROM oauth_tokens WHERE server = ? ORDER BY updated_at DESC", (server,)
        )
        return [row[0] for row in rows]

    async def connections_of(self, person: str) -> list[StoredTokens]:
        return await self._tokens("person = ? ORDER BY server", (person,))

    async def _tokens(self, where: str, params: tuple[str, ...]) -> list[StoredTokens]:
        rows = await self._rows(f"SELECT {columns(StoredTokens)} FROM oauth_tokens WHERE {where}", params)
        return [replace(from_row(StoredTokens, row), secret=bytes(row[3])) for row in rows]

    async def save_client(self, *, server: str, identity: str, secret: bytes, now: float) -> None:
        await self._change(
            "INSERT INTO oauth_clients (server, identity, secret, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (server, identity) DO UPDATE SET secret = excluded.secret,"
            " updated_at = excluded.updated_at",
            (server, identity, secret, now),
        )

    async def stored_client(self, server: str, identity: str) -> bytes | None:
        row = await self._first(
            "SELECT secret FROM oauth_clients WHERE server = ? AND identity = ?", (server, identity)
        )
        return bytes(row[0]) if row else None

    async def start_sign_in(
        self,
        *,
        state: str,
        server: str,
        person: str,
        key: ConversationKey | None,
        secret: bytes,
        expires_at: float,
        now: float,
    ) -> None:
        """Record a started authorization; expired ones (anyone's) are removed."""
        where = key_params(key) if key else ("", "", "", "")
        async with self._write() as db:
            await db.execute("DELETE FROM sign_ins WHERE expires_at <= ?", (now,))
            await db.execute(
                "INSERT INTO sign_ins (state, server, person, platform, workspace, channel, thread,"
                " secret, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (state, server, person, *where, secret, expires_at, now),
            )

    async def take_sign_in(self, state: str, now: float) -> StartedSignIn | None:
        """The started sign-in for `state`, removed so it is good once; None if unknown or expired."""
        async with self._write() as db:
            rows = await db.execute_fetchall(
                "DELETE FROM sign_ins WHERE state = ? RETURNING server, person, platform, workspace,"
                " channel, thread, secret, expires_at",
                (state,),
            )
        if not rows or rows[0][-1] <= now:
            return None
        server, person, *where, secret, expires_at = rows[0]
        key = key_from_row(where) if where[0] else None
        return from_row(StartedSignIn, (server, person, key, bytes(secret), expires_at), state=state)

    async def signed_in(self, server: str, person: str) -> list[str]:
        """The parked turns that were waiting for this sign-in: their calls may run now."""
        async with self._write() as db:
            rows = await db.execute_fetchall(
                "SELECT w.request_id, w.call_id FROM sign_in_waits w"
                " JOIN parked_turns p ON p.id = w.request_id"
                " JOIN pending_calls c ON c.request_id = w.request_id AND c.call_id = w.call_id"
                " WHERE w.server = ? AND w.person = ? AND p.status = 'waiting' AND c.status = 'pending'",
                (server, person),
            )
            await db.executemany(
                "UPDATE pending_calls SET status = 'approved', decided_by = 'sign-in',"
                f" decided_at = {self._sql.now} WHERE request_id = ? AND call_id = ? AND status = 'pending'",
                rows,
            )
        return list(dict.fromkeys(row[0] for row in rows))

    async def sign_in_waits(self, request_id: str) -> list[SignInWait]:
        rows = await self._rows(
            f"SELECT {columns(SignInWait)} FROM sign_in_waits WHERE request_id = ?", (request_id,)
        )
        return [from_row(SignInWait, row) for row in rows]

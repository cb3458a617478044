"""Everything the notes server remembers: clients, codes, tokens and notes, in memory and optionally on disk.

With `--state FILE` the whole state is written to a JSON file after every change (atomically, mode
0600: it holds live tokens) and read back at start, so a restarted server still honours the tokens it
issued. Without it the state lives and dies with the process.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
from mcp.server.auth.provider import AccessToken, AuthorizationCode, RefreshToken
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import BaseModel, ValidationError

# How long a replayed code is remembered after it expired, to revoke what it gave (RFC 6749 §4.1.2).
USED_CODE_MEMORY_SECONDS = 3600


class StateFileError(Exception):
    """The --state file exists but cannot be read as the notes server's state."""


class IssuedCode(AuthorizationCode):
    """An authorization code; `grant_id` ties it to the tokens it is exchanged for."""

    grant_id: str


class UsedCode(BaseModel):
    grant_id: str
    expires_at: float


class IssuedAccessToken(AccessToken):
    grant_id: str


class IssuedRefreshToken(RefreshToken):
    grant_id: str


class NotesState(BaseModel):
    """The JSON document of --state. A grant is one sign-in: its tokens are revoked together."""

    clients: dict[str, OAuthClientInformationFull] = {}
    codes: dict[str, IssuedCode] = {}
    used_codes: dict[str, UsedCode] = {}
    access_tokens: dict[str, IssuedAccessToken] = {}
    refresh_tokens: dict[str, IssuedRefreshToken] = {}
    notes: dict[str, list[str]] = {}

    def revoke_grant(self, grant_id: str) -> None:
        self.access_tokens = {k: v for k, v in self.access_tokens.items() if v.grant_id != grant_id}
        self.refresh_tokens = {k: v for k, v in self.refresh_tokens.items() if v.grant_id != grant_id}
        self.codes = {k: v for k, v in self.codes.items() if v.grant_id != grant_id}

    def prune(self, now: float) -> None:
        """Forget what can no longer be used, so the state file does not grow with every sign-in."""
        self.codes = {k: v for k, v in self.codes.items() if v.expires_at >= now}
        self.used_codes = {
            k: v for k, v in self.used_codes.items() if v.expires_at + USED_CODE_MEMORY_SECONDS >= now
        }
        self.access_tokens = {
            k: v for k, v in self.access_tokens.items() if v.expires_at is None or v.expires_at >= now
        }


class NotesStore:
    """The state plus where (if anywhere) it is kept; `save()` after each change."""

    def __init__(self, state: NotesState, path: Path | None) -> None:
        self.state = state
        self._path = path
        self._lock = anyio.Lock()

    @classmethod
    def open(cls, path: Path | None) -> NotesStore:
        if path is None or not path.exists():
            return cls(NotesState(), path)
        try:
            state = NotesState.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as exc:
            raise StateFileError(
                f"cannot read the state file {path}: {exc}. Delete it to start with no clients or tokens."
            ) from exc
        state.prune(time.time())
        return cls(state, path)

    async def save(self) -> None:
        self.state.prune(time.time())
        if self._path is None:
            return
        document = self.state.model_dump_json(indent=1)
        async with self._lock:
            await anyio.to_thread.run_sync(_write_atomically, self._path, document)


def _write_atomically(path: Path, document: str) -> None:
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(document)
    os.replace(partial, path)

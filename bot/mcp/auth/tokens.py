"""The SDK's `TokenStorage` over the conversation store: one person's tokens for one server, sealed,
with the absolute expiry beside them (the SDK's is relative to the issue, meaningless after a restart)."""

from __future__ import annotations

import time
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from bot.mcp.auth.vault import Vault
from bot.store.sign_ins import SignInLedger
from bot.store.sign_ins import StoredTokens as StoredRow


class StoredTokens:
    """`TokenStorage` for (server, person). The client that got the tokens is sealed with them: a
    refresh must present its id even where the shared `registration` differs (`nerve connect`)."""

    def __init__(
        self, ledger: SignInLedger, vault: Vault, *, server: str, person: str, registration: str
    ) -> None:
        self._ledger = ledger
        self._vault = vault
        self.server = server
        self.person = person
        self._registration = registration
        self.client: OAuthClientInformationFull | None = None
        self.expires_at: float | None = None
        # When the tokens this storage last read or wrote were stored: a later row was written by
        # another sign-in (a step-up, another process), and the provider holding these is stale.
        self.stored_at = 0.0
        self._issuer = ""

    async def _opened(self) -> tuple[StoredRow | None, dict[str, Any] | None]:
        """The stored row and what it holds; None for what it holds when sealed under another key."""
        stored = await self._ledger.stored_tokens(self.server, self.person)
        opened = self._vault.open(stored.secret) if stored is not None else None
        return stored, opened if isinstance(opened, dict) else None

    async def get_tokens(self) -> OAuthToken | None:
        stored, opened = await self._opened()
        if stored is None or opened is None or "token" not in opened:
            return None  # sealed under another key: as good as signed out
        self.expires_at = opened.get("expires_at")
        self.stored_at = stored.updated_at
        self._issuer = stored.issuer
        if isinstance(opened.get("client"), dict):
            self.client = OAuthClientInformationFull.model_validate(opened["client"])
        return OAuthToken.model_validate(opened["token"])

    async def set_tokens(self, tokens: OAuthToken) -> None:
        now = time.time()
        self.expires_at = now + tokens.expires_in if tokens.expires_in else None
        self.stored_at = now
        record: dict[str, object] = {
            "token": tokens.model_dump(mode="json"),
            "expires_at": self.expires_at,
            "client": self.client.model_dump(mode="json", exclude_none=True) if self.client else None,
        }
        wanted = await self.wanted_scope()
        if wanted and not set(wanted.split()) <= set((tokens.scope or "").split()):
            record["wanted"] = wanted  # a refresh grants no more than before: still wanted
        await self._save(record, self._issuer, tokens.scope, now)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.client is None:
            await self.get_tokens()
        if self.client is not None:
            return self.client
        sealed = await self._ledger.stored_client(self.server, self._registration)
        opened = self._vault.open(sealed) if sealed is not None else None
        if not isinstance(opened, dict):
            return None
        info = OAuthClientInformationFull.model_validate(opened)
        self._issuer = info.issuer or self._issuer
        self.client = info
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        issuer = client_info.issuer or ""
        if issuer != self._issuer and self._issuer:
            # Another authorization server now guards this server: tokens from the old one are void.
            await self._ledger.forget_tokens(self.server, self.person)
        self._issuer = issuer
        self.client = client_info
        await self._ledger.save_client(
            server=self.server,
            identity=self._registration,
            secret=self._vault.seal(client_info.model_dump(mode="json", exclude_none=True)),
            now=time.time(),
        )

    async def want_scope(self, scope: str) -> None:
        """Remember beside the tokens that a request needed `scope`, so `nerve connect` asks for it."""
        stored, opened = await self._opened()
        if stored is None or opened is None or opened.get("wanted") == scope:
            return
        await self._save({**opened, "wanted": scope}, stored.issuer, stored.scope, stored.updated_at)

    async def _save(self, record: dict[str, Any], issuer: str, scope: str | None, now: float) -> None:
        secret = self._vault.seal(record)
        await self._ledger.save_tokens(
            server=self.server, person=self.person, issuer=issuer, secret=secret, scope=scope, now=now
        )

    async def wanted_scope(self) -> str | None:
        """The scope a request asked for that the stored tokens lack (see `want_scope`), if any."""
        wanted = ((await self._opened())[1] or {}).get("wanted")
        return wanted if isinstance(wanted, str) and wanted else None

    async def forget(self) -> bool:
        return await self._ledger.forget_tokens(self.server, self.person)

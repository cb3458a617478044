"""The authorization server's bookkeeping, behind the `mcp` SDK's provider interface.

The SDK's own handlers do the protocol work at /token, /register and /revoke (client authentication,
PKCE, redirect_uri and expiry checks); this class decides what a code or token is worth: codes are
single use and short-lived, a replayed code revokes everything it gave, refresh tokens rotate, and a
revocation ends the whole sign-in (its access and refresh tokens alike).
"""

from __future__ import annotations

import logging
import math
import secrets
import time

from mcp.server.auth.provider import (
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from servers.notes_oauth import scopes
from servers.notes_oauth.clients import ClientDirectory, NotesClient
from servers.notes_oauth.store import (
    IssuedAccessToken,
    IssuedCode,
    IssuedRefreshToken,
    NotesStore,
    UsedCode,
)

logger = logging.getLogger("servers.notes_oauth")

CODE_LIFETIME_SECONDS = 120


class NotesAuthorizationServer(
    OAuthAuthorizationServerProvider[IssuedCode, IssuedRefreshToken, IssuedAccessToken]
):
    def __init__(
        self,
        store: NotesStore,
        clients: ClientDirectory,
        *,
        issuer: str,
        resource: str,
        token_lifetime: int,
    ) -> None:
        self.store = store
        self.clients = clients
        self.issuer = issuer
        self.resource = resource
        self.token_lifetime = token_lifetime

    def is_this_resource(self, resource: str) -> bool:
        """Whether an RFC 8707 `resource` names this MCP server (a trailing slash aside)."""
        return bool(resource) and resource.rstrip("/") == self.resource.rstrip("/")

    # Clients

    async def get_client(self, client_id: str) -> NotesClient | None:
        return self.clients.find(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.store.state.clients[client_info.client_id] = client_info
        await self.store.save()
        logger.info("registered client %s (%s)", client_info.client_id, client_info.client_name or "no name")

    # Authorization

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        # The SDK's authorization handler is not mounted: the sign-in page (authorize.py) replaces it.
        raise AuthorizeError("server_error", "sign-in runs through the page at /authorize")

    async def issue_code(self, client: NotesClient, params: AuthorizationParams, user: str) -> str:
        """A code for `user`'s consent to `client`; called by the sign-in page once they allowed it."""
        code = secrets.token_urlsafe(32)
        self.store.state.codes[code] = IssuedCode(
            code=code,
            scopes=params.scopes or list(scopes.DEFAULT),
            expires_at=time.time() + CODE_LIFETIME_SECONDS,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=user,
            grant_id=secrets.token_hex(8),
        )
        await self.store.save()
        logger.info("sign-in: %s allowed client %s", user, client.client_id)
        return code

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> IssuedCode | None:
        used = self.store.state.used_codes.get(authorization_code)
        if used is not None:
            logger.warning("a used code was presented again: revoking the tokens it gave")
            self.store.state.revoke_grant(used.grant_id)
            await self.store.save()
            return None
        return self.store.state.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: IssuedCode
    ) -> OAuthToken:
        state = self.store.state
        if state.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code was already used")
        state.used_codes[authorization_code.code] = UsedCode(
            grant_id=authorization_code.grant_id, expires_at=authorization_code.expires_at
        )
        return await self._issue(
            client.client_id,
            authorization_code.scopes,
            authorization_code.subject,
            authorization_code.grant_id,
        )

    # Tokens

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> IssuedRefreshToken | None:
        return self.store.state.refresh_tokens.get(refresh_token)

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: IssuedRefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        if self.store.state.refresh_tokens.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token was already used")
        return await self._issue(client.client_id, scopes, refresh_token.subject, refresh_token.grant_id)

    async def load_access_token(self, token: str) -> IssuedAccessToken | None:
        found = self.store.state.access_tokens.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def verify_token(self, token: str) -> IssuedAccessToken | None:
        """The bearer check of /mcp (the SDK's `TokenVerifier` protocol): the same tokens, same rules."""
        return await self.load_access_token(token)

    async def revoke_token(self, token: IssuedAccessToken | IssuedRefreshToken) -> None:
        self.store.state.revoke_grant(token.grant_id)
        await self.store.save()
        logger.info("revoked the sign-in of %s for client %s", token.subject, token.client_id)

    async def _issue(
        self, client_id: str, granted: list[str], subject: str | None, grant_id: str
    ) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        state = self.store.state
        state.access_tokens[access] = IssuedAccessToken(
            token=access,
            client_id=client_id,
            scopes=granted,
            # Rounded up: a token is good for at least --token-lifetime seconds, never a moment less.
            expires_at=math.ceil(time.time()) + self.token_lifetime,
            resource=self.resource,
            subject=subject,
            claims={"iss": self.issuer},
            grant_id=grant_id,
        )
        state.refresh_tokens[refresh] = IssuedRefreshToken(
            token=refresh,
            client_id=client_id,
            scopes=granted,
            resource=self.resource,
            subject=subject,
            grant_id=grant_id,
        )
        await self.store.save()
        return OAuthToken(
            access_token=access,
            expires_in=self.token_lifetime,
            scope=" ".join(granted),
            refresh_token=refresh,
        )

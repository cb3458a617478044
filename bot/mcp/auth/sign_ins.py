"""Per-person sign-in from the chat: start an authorization, park, finish it from the callback.

Nobody can wait inside a chat request for a person's browser, so `ParkingOAuth` seals the flow at
the authorization request; the callback, in whichever process, finishes it by its single-use `state`."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, InitVar, dataclass

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    validate_authorization_response_iss,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, ProtectedResourceMetadata
from pydantic import BaseModel

from bot.errors import NerveError, SignInFailed
from bot.mcp.address_guard import PlainHttpRefused, entry_client
from bot.mcp.auth.provider import NerveOAuth
from bot.mcp.auth.tokens import StoredTokens
from bot.mcp.auth.vault import Vault
from bot.mcp.server_config import ServerConfig
from bot.store.sign_ins import SignInLedger
from bot.types import ConversationKey, SignedIn, SignInNeeded

logger = logging.getLogger(__name__)

# The conversation a sign-in starts from, when a call in a turn starts it.
_conversation: contextvars.ContextVar[ConversationKey | None] = contextvars.ContextVar(
    "sign_in_conversation", default=None
)
# A token-endpoint answer or a probe that takes longer than this is a broken server.
HTTP_TIMEOUT = 15.0


class SignInRequired(NerveError):
    """The person must sign in in their browser; the flow is stored under `sign_in.state`."""

    def __init__(self, sign_in: SignInNeeded) -> None:
        super().__init__(f"sign in to {sign_in.server} first")
        self.sign_in = sign_in


def _not_a_parked_sign_in(record: logging.LogRecord) -> bool:
    """The SDK logs every exception of its flow as an error; a parked sign-in is the plan, not one."""
    return not (record.exc_info and isinstance(record.exc_info[1], SignInRequired))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_not_a_parked_sign_in)


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    server: str
    since: float
    scope: str | None


class ParkingOAuth(NerveOAuth):
    """nerve's provider, except that the authorization step is stored and ends the request."""

    def __init__(self, sign_ins: SignIns, server: str, person: str) -> None:
        config = sign_ins.configs[server]
        assert config.url is not None and config.auth is not None
        # The person's stored tokens (the context's storage may wrap them with a pre-registered client).
        self.tokens = sign_ins.storage(server, person)
        super().__init__(
            config.url,
            config.auth,
            self.tokens,
            redirect_uri=sign_ins.redirect_uri,
            client_metadata_url=sign_ins.client_metadata_url,
        )
        self._sign_ins = sign_ins
        # The last sign-in this provider stopped at, until the host takes it (a call that failed).
        self.asked: SignInNeeded | None = None
        self._server = server
        self._person = person

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.tokens.expires_at is not None:
            # Refresh a little early: a call must not be the one that finds the token expired.
            self.context.token_expiry_time = self.tokens.expires_at - 60

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        context = self.context
        sent = self.authorization_request()
        flow = {
            "verifier": sent.code_verifier,
            "redirect_uri": sent.redirect_uri,
            "server_url": context.server_url,
            "protocol_version": context.protocol_version,
            "scope": context.client_metadata.scope,
            "client_info": _dumped(context.client_info),
            "oauth_metadata": _dumped(context.oauth_metadata),
            "resource_metadata": _dumped(context.protected_resource_metadata),
        }
        if self.context.current_tokens is not None and context.client_metadata.scope:
            # A step-up: the stored sign-in lacks access this request needs. Kept with the tokens, so
            # that signing in again from the terminal (`nerve connect`) asks for it as well.
            await self.tokens.want_scope(context.client_metadata.scope)
        await self._sign_ins.record(state=sent.state, server=self._server, person=self._person, flow=flow)
        self.asked = SignInNeeded(server=self._server, person=self._person, url=sent.url, state=sent.state)
        raise SignInRequired(self.asked)


def _dumped(model: BaseModel | None) -> dict[str, object] | None:
    return model.model_dump(mode="json", exclude_none=True) if model is not None else None


@dataclass(eq=False)
class SignIns:
    servers: InitVar[Mapping[str, ServerConfig]]
    ledger: SignInLedger
    vault: Vault
    _: KW_ONLY
    redirect_uri: str
    client_metadata_url: str | None = None
    timeout: float = 900.0

    def __post_init__(self, servers: Mapping[str, ServerConfig]) -> None:
        # The servers people sign in to with OAuth, by name.
        self.configs = {
            name: c for name, c in servers.items() if c.auth is not None and c.auth.type == "oauth"
        }

    def per_person_servers(self) -> list[str]:
        return [name for name in self.configs if self.per_person(name)]

    def per_person(self, server: str) -> bool:
        config = self.configs.get(server)
        return config is not None and config.auth is not None and config.auth.per_person

    def storage(self, server: str, person: str) -> StoredTokens:
        return StoredTokens(
            self.ledger, self.vault, server=server, person=person, registration=self.redirect_uri
        )

    def provider(self, server: str, person: str) -> ParkingOAuth:
        """What signs `person`'s requests to `server` in; an authorization it needs is parked."""
        return ParkingOAuth(self, server, person)

    async def people_connected(self, server: str) -> list[str]:
        return await self.ledger.people_connected(server)

    async def has_tokens(self, server: str, person: str) -> bool:
        return await self.storage(server, person).get_tokens() is not None

    async def record(self, *, state: str, server: str, person: str, flow: Mapping[str, object]) -> None:
        now = time.time()
        await self.ledger.start_sign_in(
            state=state,
            server=server,
            person=person,
            key=_conversation.get(),
            secret=self.vault.seal(flow),
            expires_at=now + self.timeout,
            now=now,
        )

    async def begin(self, server: str, person: str, key: ConversationKey | None = None) -> SignInNeeded:
        """Start a sign-in by asking the server as this person, up to the authorization request."""
        config = self.configs[server]
        assert config.url is not None
        token = _conversation.set(key)
        try:
            async with self._http(server, self.provider(server, person)) as http:
                await http.post(config.url, json=PROBE, headers=PROBE_HEADERS)
        except SignInRequired as needed:
            return needed.sign_in
        finally:
            _conversation.reset(token)
        raise SignInFailed(f"{server} let nerve in without signing in: no sign-in is needed")

    async def complete(self, state: str, code: str | None, iss: str | None, error: str | None) -> SignedIn:
        """Finish the sign-in the browser came back with; raises `SignInFailed` with what to do."""
        if (started := await self.ledger.take_sign_in(state, time.time())) is None:
            raise SignInFailed(
                "This sign-in link was already used or has expired. Ask nerve again for a new one."
            )
        server = started.server
        if server not in self.configs:
            raise SignInFailed(f"{server} is no longer configured.")
        if error:
            raise SignInFailed(f"{server} did not sign you in ({error}). Ask nerve again to retry.")
        if not code:
            raise SignInFailed("The sign-in came back without a code. Ask nerve again for a new link.")
        flow = self.vault.open(started.secret)
        if not isinstance(flow, dict):
            raise SignInFailed("This sign-in can no longer be read (the key changed). Ask nerve again.")
        provider = self.provider(server, started.person)
        context = provider.context
        context.client_info = OAuthClientInformationFull.model_validate(flow["client_info"])
        provider.tokens.client = context.client_info  # sealed with the tokens it gets
        if flow.get("oauth_metadata"):
            context.oauth_metadata = OAuthMetadata.model_validate(flow["oauth_metadata"])
        if resource := flow.get("resource_metadata"):
            context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(resource)
        context.protocol_version = flow.get("protocol_version")
        context.client_metadata.scope = flow.get("scope")
        try:
            validate_authorization_response_iss(iss, context.oauth_metadata)
        except Exception as exc:
            logger.warning("sign-in to %s refused: %s", server, exc)
            raise SignInFailed(
                f"The answer did not come from {server}'s sign-in service (issuer check failed)."
            ) from exc
        provider._initialized = True
        request = await provider._exchange_token_authorization_code(code, str(flow["verifier"]))
        try:
            async with self._http(server) as http:
                await provider._handle_token_response(await http.send(request))
        except PlainHttpRefused as exc:
            logger.warning("sign-in to %s: token exchange not sent: %s", server, exc)
            raise SignInFailed(f"{server}'s sign-in was not finished: {exc}.") from exc
        except Exception as exc:
            logger.warning("sign-in to %s: token exchange failed: %s", server, type(exc).__name__)
            raise SignInFailed(f"{server} did not accept the sign-in. Ask nerve again to retry.") from exc
        request_ids = await self.ledger.signed_in(server, started.person)
        logger.info("%s signed in to %s", started.person, server)
        return SignedIn(server=server, person=started.person, request_ids=tuple(request_ids))

    async def connections(self, person: str) -> list[Connection]:
        rows = [r for r in await self.ledger.connections_of(person) if r.server in self.configs]
        return [Connection(server=r.server, since=r.updated_at, scope=r.scope) for r in rows]

    async def disconnect(self, server: str, person: str) -> bool:
        """Revoke at the server where it supports RFC 7009, then forget; True if there was a connection."""
        storage = self.storage(server, person)
        if (tokens := await storage.get_tokens()) is None:
            return False
        client = await storage.get_client_info()
        revocation = await self._revocation_endpoint(server)
        if revocation and client is not None:
            for hint in ("refresh_token", "access_token"):
                if not (token := getattr(tokens, hint)):
                    continue
                data = {"token": token, "token_type_hint": hint, "client_id": client.client_id}
                auth: httpx2.BasicAuth | None = None
                if client.client_secret and client.token_endpoint_auth_method == "client_secret_basic":
                    auth = httpx2.BasicAuth(client.client_id, client.client_secret)
                    data.pop("client_id")
                elif client.client_secret:
                    data["client_secret"] = client.client_secret
                try:
                    async with self._http(server) as http:
                        await http.post(revocation, data=data, auth=auth or httpx2.USE_CLIENT_DEFAULT)
                except httpx2.HTTPError as exc:
                    logger.warning("could not revoke a token at %s: %s", server, type(exc).__name__)
        return await storage.forget()

    def _http(self, server: str, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return entry_client(self.configs[server], auth=auth, timeout=HTTP_TIMEOUT)

    async def _revocation_endpoint(self, server: str) -> str | None:
        """Read from the authorization server's metadata, found as the SDK finds it."""
        server_url = self.configs[server].url
        assert server_url is not None
        auth_server: str | None = None
        try:
            async with self._http(server) as http:
                for url in build_protected_resource_metadata_discovery_urls(None, server_url):
                    response = await http.get(url)
                    if response.status_code == 200:
                        servers = response.json().get("authorization_servers") or []
                        auth_server = str(servers[0]) if servers else None
                        break
                for url in build_oauth_authorization_server_metadata_discovery_urls(auth_server, server_url):
                    response = await http.get(url)
                    if response.status_code == 200:
                        found = response.json()
                        endpoint = found.get("revocation_endpoint") if isinstance(found, dict) else None
                        return str(endpoint) if endpoint else None
        except httpx2.HTTPError:
            return None
        return None


# A request that needs a signed-in caller: an MCP initialize, as any client's first request.
PROBE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "nerve", "version": "0.1.0"},
    },
}
PROBE_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}

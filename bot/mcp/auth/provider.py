"""How nerve signs in to a remote MCP server: the `mcp` SDK's OAuth client, set up the nerve way.

`NerveOAuth` adds nerve's client identity, `auth.scope` where the server names none, a bound on
sign-ins that do not help, and an authorization split in two so a chat turn can park between the
halves; it relies on `_auth_flow`, `_perform_authorization*` and `OAuthContext` of the pinned `mcp`."""

from __future__ import annotations

import logging
import secrets
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode, urljoin, urlparse

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError, PKCEParameters
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.oauth2 import TokenStorage
from mcp.client.auth.utils import extract_field_from_www_auth, validate_authorization_response_iss
from mcp.shared._request_clock import waiting_on_a_person
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    TokenEndpointAuthMethod,
)
from pydantic import ValidationError

from bot.errors import SignInError
from bot.mcp.address_guard import PlainHttpRefused
from bot.mcp.auth.loopback import CALLBACK as LOOPBACK_CALLBACK
from bot.mcp.auth.loopback import HOST as LOOPBACK_HOST
from bot.mcp.server_config import AuthConfig
from bot.plain_http import plain_http_host

logger = logging.getLogger(__name__)

CLIENT_NAME = "nerve"
GRANT_TYPES = ["authorization_code", "refresh_token"]
# Where nerve serves its Client ID Metadata Document and receives the browser, below NERVE_PUBLIC_URL.
CLIENT_METADATA_PATH = "/oauth/client.json"
CALLBACK_PATH = "/oauth/callback"
# The loopback sign-in's redirect URI as a metadata document lists it: without its port.
LOOPBACK_REDIRECT_URI = f"http://{LOOPBACK_HOST}{LOOPBACK_CALLBACK}"
# Sign-ins in a row after which the server still refused: past this, refusals are passed on instead
# of opening yet another browser tab (the suite's scope-retry-limit allows at most 3 attempts).
MAX_UNHELPFUL_SIGN_INS = 2
# A registration's method when the operator set none: a public client's where the server takes one.
_METHOD_PREFERENCE: tuple[TokenEndpointAuthMethod, ...] = (
    "none",
    "client_secret_basic",
    "client_secret_post",
)
_METADATA_PATHS = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizationRequest:
    """One authorization about to be sent to the browser; `state` and `code_verifier` are its secrets."""

    url: str
    state: str
    code_verifier: str
    redirect_uri: str


class NerveOAuth(OAuthClientProvider):
    """The SDK's `OAuthClientProvider` with nerve's client identity, registration order and bounds."""

    def __init__(
        self,
        server_url: str,
        config: AuthConfig,
        storage: TokenStorage,
        *,
        redirect_uri: str,
        client_metadata_url: str | None = None,
        redirect_handler: Callable[[str], Awaitable[None]] | None = None,
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
        also_scope: str | None = None,
    ) -> None:
        if config.type != "oauth":
            raise ValueError(f"NerveOAuth signs in with 'oauth', not {config.type!r} (see auth_for)")
        self._config = config
        pre_registered = pre_registered_client(config, redirect_uri)
        super().__init__(
            server_url,
            client_metadata(config, redirect_uri),
            storage if pre_registered is None else PreRegistered(storage, pre_registered),
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=client_metadata_url,
        )
        self._unhelpful_sign_ins = 0
        # Scopes every authorization asks for on top of the SDK's choice: what a step-up at run time
        # asked for, remembered until an admin signs in again (`nerve connect`).
        self._also_scope = also_scope
        # Why the latest sign-in failed or was refused (kept after later successes, for reports).
        self.last_failure: Exception | None = None

    def authorization_request(self) -> AuthorizationRequest:
        """The authorization URL with a new `state` and PKCE pair, exactly as the SDK builds it."""
        context = self.context
        if context.client_info is None:
            raise OAuthFlowError("No client info available for authorization")
        if not context.client_metadata.redirect_uris:
            raise OAuthFlowError("No redirect URIs provided for authorization code grant")
        if context.oauth_metadata is not None and context.oauth_metadata.authorization_endpoint:
            endpoint = str(context.oauth_metadata.authorization_endpoint)
        else:  # 2025-03-26 servers without metadata: the default endpoint at the server's root
            endpoint = urljoin(context.get_authorization_base_url(context.server_url), "/authorize")
        if (insecure := plain_http_host(endpoint)) is not None:
            # The page where a person types their password: never in the clear, whatever the entry
            # allows (the requests nerve sends itself are checked by the client's PlainHttpCheck).
            raise PlainHttpRefused(
                insecure,
                f"its sign-in page is plain http to {insecure}, which would carry a person's password "
                "in the clear: it needs https",
            )
        pkce = PKCEParameters.generate()
        state = secrets.token_urlsafe(32)
        redirect_uri = str(context.client_metadata.redirect_uris[0])
        params = {
            "response_type": "code",
            "client_id": context.client_info.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
        }
        if context.should_include_resource_param(context.protocol_version):
            params["resource"] = context.get_resource_url()
        if context.client_metadata.scope:
            params["scope"] = context.client_metadata.scope
            if "offline_access" in context.client_metadata.scope.split():
                params["prompt"] = "consent"  # OpenID: offline_access needs consent
        return AuthorizationRequest(
            url=f"{endpoint}?{urlencode(params)}",
            state=state,
            code_verifier=pkce.code_verifier,
            redirect_uri=redirect_uri,
        )

    def authorization_code(self, sent: AuthorizationRequest, result: AuthorizationCodeResult) -> str:
        """The code from the browser's answer to `sent`, once `state` and `iss` (RFC 9207) check out."""
        if result.state is None or not secrets.compare_digest(result.state, sent.state):
            raise OAuthFlowError("State parameter mismatch: the answer is not for this sign-in")
        validate_authorization_response_iss(result.iss, self.context.oauth_metadata)
        if not result.code:
            raise OAuthFlowError("No authorization code received")
        return result.code

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        """Send the browser off and wait for it (a terminal, `nerve connect`): (code, verifier)."""
        if self.context.redirect_handler is None or self.context.callback_handler is None:
            raise OAuthFlowError("No redirect or callback handler to sign in with")
        sent = self.authorization_request()
        with waiting_on_a_person():  # a call's timeout stands still while the person signs in
            await self.context.redirect_handler(sent.url)
            result = await self.context.callback_handler()
        return self.authorization_code(sent, result), sent.code_verifier

    async def _perform_authorization(self) -> httpx2.Request:
        # Scope choice is the SDK's (challenge, then resource metadata, then server metadata); the
        # operator's scope fills in only where all of those are silent.
        metadata = self.context.client_metadata
        if not metadata.scope and self._config.scope:
            metadata.scope = self._config.scope
        if self._also_scope:
            metadata.scope = scope_union(metadata.scope, self._also_scope)
        return await super()._perform_authorization()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, watched to pick the registration method and stop sign-ins that cannot help."""
        flow = super()._auth_flow(request)
        tries = 0  # times `request` itself went out: the second is the retry after signing in
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request:
                    tries += 1
                    if self._settled(response, retried=tries > 1):
                        return  # the server's answer stands: no (further) sign-in
                else:
                    await self._note_metadata(outgoing, response)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except Exception as exc:
            self.last_failure = exc
            raise
        finally:
            await flow.aclose()

    def _settled(self, response: httpx2.Response, *, retried: bool) -> bool:
        """Whether `response` to the request being signed is final, rather than a cue to sign in."""
        refused = response.status_code == 401 or (
            response.status_code == 403
            and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        )
        if not refused:
            self._unhelpful_sign_ins = 0
            return False
        if retried:  # refused straight after signing in
            self._unhelpful_sign_ins += 1
            when = "even after signing in"
        elif self._unhelpful_sign_ins >= MAX_UNHELPFUL_SIGN_INS:
            when = f"after {self._unhelpful_sign_ins} sign-ins"
        elif response.status_code == 403 and self._granted_already(response):
            when = "although those scopes were granted"
        else:
            return False
        self.last_failure = SignInError(_refusal(response, when))
        return True

    def _granted_already(self, response: httpx2.Response) -> bool:
        """A 403 asking for scopes the current token already has: signing in again cannot help."""
        wanted = extract_field_from_www_auth(response, "scope")
        tokens: OAuthToken | None = self.context.current_tokens
        if not wanted or tokens is None or tokens.scope is None:
            return False
        return set(wanted.split()) <= set(tokens.scope.split())

    async def _note_metadata(self, sent: httpx2.Request, response: httpx2.Response) -> None:
        """On the server's metadata, before the SDK registers: ask for a method it supports."""
        if self._config.token_endpoint_auth_method is not None or self.context.client_info is not None:
            return
        if sent.method != "GET" or response.status_code != 200:
            return
        if not any(part in sent.url.path for part in _METADATA_PATHS):
            return
        try:
            metadata = OAuthMetadata.model_validate_json(await response.aread())
        except (ValidationError, httpx2.StreamError, httpx2.HTTPError):
            return  # the SDK reads it again and decides what a bad document means
        method = registration_method(metadata.token_endpoint_auth_methods_supported)
        self.context.client_metadata.token_endpoint_auth_method = method


@dataclass(frozen=True, slots=True)
class PreRegistered:
    """`TokenStorage` whose client is the one the operator configured: tokens go to `storage`."""

    storage: TokenStorage
    client: OAuthClientInformationFull

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client


def client_metadata(config: AuthConfig, redirect_uri: str) -> OAuthClientMetadata:
    """Who nerve says it is when it registers (RFC 7591) or is looked up by its document (CIMD)."""
    return OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the URL
        grant_types=list(GRANT_TYPES),
        token_endpoint_auth_method=config.token_endpoint_auth_method or "none",
        application_type=_application_type(redirect_uri),
    )


def pre_registered_client(config: AuthConfig, redirect_uri: str) -> OAuthClientInformationFull | None:
    """The client the operator registered, if any; a secret goes with HTTP Basic by default (RFC 6749)."""
    if not config.client_id:
        return None
    method = config.token_endpoint_auth_method or ("client_secret_basic" if config.client_secret else "none")
    return OAuthClientInformationFull(
        client_id=config.client_id,
        client_secret=config.client_secret,
        token_endpoint_auth_method=method,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=list(GRANT_TYPES),
        client_name=CLIENT_NAME,
    )


def registration_method(supported: list[str] | None) -> TokenEndpointAuthMethod:
    """A public client's method, unless the server lists only secret ones (the first it lists)."""
    return next((method for method in _METHOD_PREFERENCE if method in (supported or ())), "none")


def auth_for(
    server_url: str, config: AuthConfig, storage: TokenStorage, *, redirect_uri: str, **handlers: Any
) -> httpx2.Auth:
    """The `httpx2.Auth` for an entry's `auth`: `NerveOAuth`, or the SDK's client-credentials provider."""
    if config.type == "client_credentials":
        assert config.client_id and config.client_secret  # AuthConfig checks both are set
        method = config.token_endpoint_auth_method
        with warnings.catch_warnings():
            # The SDK asks for the issuer the credentials belong to; the servers file has no such
            # field, so whichever authorization server the MCP server names is used.
            warnings.simplefilter("ignore")
            return ClientCredentialsOAuthProvider(
                server_url,
                storage,
                client_id=config.client_id,
                client_secret=config.client_secret,
                token_endpoint_auth_method="client_secret_post"
                if method == "client_secret_post"
                else "client_secret_basic",
                scope=config.scope,
            )
    return NerveOAuth(server_url, config, storage, redirect_uri=redirect_uri, **handlers)


def client_metadata_url(public_url: str) -> str | None:
    """Where nerve's Client ID Metadata Document is served; None unless https (servers fetch no other)."""
    url = public_url.rstrip("/") + CLIENT_METADATA_PATH
    return url if urlparse(url).scheme == "https" else None


def client_metadata_document(public_url: str) -> dict[str, Any]:
    """nerve's Client ID Metadata Document; the loopback redirect's changing port is ignored (RFC 8252)."""
    base = public_url.rstrip("/")
    redirect_uri = base + CALLBACK_PATH
    return {
        "client_id": base + CLIENT_METADATA_PATH,
        "client_name": CLIENT_NAME,
        "client_uri": base,
        "redirect_uris": [redirect_uri, LOOPBACK_REDIRECT_URI],
        "grant_types": list(GRANT_TYPES),
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": _application_type(redirect_uri),
    }


def _application_type(redirect_uri: str) -> Literal["native", "web"]:
    """SEP-837: a loopback redirect is a native app's; anything else a web application's."""
    return "native" if urlparse(redirect_uri).hostname in ("127.0.0.1", "localhost", "::1") else "web"


def scope_union(*scopes: str | None) -> str:
    """Space-separated scopes, each once, in the order first named."""
    return " ".join(dict.fromkeys(word for scope in scopes for word in (scope or "").split()))


def _refusal(response: httpx2.Response, when: str) -> str:
    host = response.request.url.host
    if response.status_code == 403:
        scope = extract_field_from_www_auth(response, "scope")
        wanted = f" (it asks for scope {scope})" if scope else ""
        return f"{host} refused access {when}{wanted}: ask its administrator to grant your account access."
    return f"{host} did not accept the sign-in {when}: try again later, or ask its administrator."

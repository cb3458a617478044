"""The authorization server's routes: metadata, registration, sign-in, token and revocation.

Registration, token and revocation are the `mcp` SDK's own handlers, with a little in front of the
token and revocation handlers: a client authenticating with HTTP Basic need not repeat its client_id
in the form (RFC 6749 §2.3.1 does not ask it to), a public client may revoke without a client_secret
field, and a token request naming a `resource` other than this MCP server is refused with
`invalid_target` (RFC 8707 §2.2).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from urllib.parse import parse_qsl, unquote, urlencode

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.routes import (
    AUTHORIZATION_PATH,
    REGISTRATION_PATH,
    REVOCATION_PATH,
    TOKEN_PATH,
    build_metadata,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from servers.notes_oauth import scopes
from servers.notes_oauth.authorize import SignInPage
from servers.notes_oauth.provider import NotesAuthorizationServer

METADATA_PATH = "/.well-known/oauth-authorization-server"
CLIENT_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]


def authorization_server_metadata(issuer: str) -> OAuthMetadata:
    """RFC 8414 metadata for what this server really does (PKCE S256, iss in responses, CIMD)."""
    metadata = build_metadata(
        AnyHttpUrl(issuer),
        service_documentation_url=None,
        client_registration_options=ClientRegistrationOptions(enabled=True),
        revocation_options=RevocationOptions(enabled=True),
    )
    # Validated again from plain values so the issuer keeps its exact spelling (no trailing slash):
    # RFC 9207 clients compare the `iss` of the redirect with it character for character.
    return OAuthMetadata.model_validate(
        metadata.model_dump(mode="json", exclude_none=True)
        | {
            "issuer": issuer,
            "scopes_supported": list(scopes.SUPPORTED),
            "token_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
            "revocation_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": True,
        }
    )


def issuer_routes(server: NotesAuthorizationServer) -> list[Route]:
    authenticator = ClientAuthenticator(server)
    tokens = TokenHandler(server, authenticator)
    revocations = RevocationHandler(server, authenticator)
    registrations = RegistrationHandler(
        server,
        options=ClientRegistrationOptions(
            enabled=True, valid_scopes=list(scopes.SUPPORTED), default_scopes=list(scopes.DEFAULT)
        ),
    )
    metadata = MetadataHandler(authorization_server_metadata(server.issuer))
    sign_in = SignInPage(server)

    async def token(request: Request) -> Response:
        request = await _as_the_sdk_expects(request)
        resource = (await request.form()).get("resource")
        if isinstance(resource, str) and resource and not server.is_this_resource(resource):
            return JSONResponse(
                {
                    "error": "invalid_target",
                    "error_description": f"this server issues tokens for {server.resource} only",
                },
                status_code=400,
                headers={"Cache-Control": "no-store"},
            )
        answer: Response = await tokens.handle(request)
        return answer

    async def revoke(request: Request) -> Response:
        return await revocations.handle(await _as_the_sdk_expects(request, secret_field=True))

    return [
        Route(METADATA_PATH, metadata.handle, methods=["GET"]),
        Route(AUTHORIZATION_PATH, sign_in.handle, methods=["GET", "POST"]),
        Route(TOKEN_PATH, token, methods=["POST"]),
        Route(REGISTRATION_PATH, registrations.handle, methods=["POST"]),
        Route(REVOCATION_PATH, revoke, methods=["POST"]),
    ]


async def _as_the_sdk_expects(request: Request, *, secret_field: bool = False) -> Request:
    """The request, with form fields the SDK's handlers insist on but RFC 6749 and RFC 7009 do not.

    The handlers read client_id from the form only, while a client authenticating with HTTP Basic
    may leave it out; and the revocation handler requires a `client_secret` field even from a
    public client (`secret_field=True` adds an empty one, which such a client's check ignores).
    """
    header = request.headers.get("authorization", "")
    body = await request.body()
    pairs = parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    present = {key for key, _ in pairs}
    added: list[tuple[str, str]] = []
    if "client_id" not in present and header.lower().startswith("basic "):
        # A malformed header is left for the SDK's authenticator to explain.
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            basic_id = base64.b64decode(header[6:]).decode("utf-8").split(":", 1)[0]
            added.append(("client_id", unquote(basic_id)))
    if secret_field and "client_secret" not in present:
        added.append(("client_secret", ""))
    if not added:
        return request
    new_body = urlencode([*pairs, *added]).encode()
    headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(new_body)).encode()))
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await request.receive()
        sent = True
        return {"type": "http.request", "body": new_body, "more_body": False}

    return Request({**request.scope, "headers": headers}, receive)

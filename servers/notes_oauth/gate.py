"""The door of /mcp: 401 without a valid token, 403 when a tool call needs a scope the token lacks.

The SDK's `RequireAuthMiddleware` answers 401 but names no scope, and checks one fixed scope list for
every request; a per-tool step-up needs more. So this gate:
- answers a request without a valid bearer token with 401 and
  `WWW-Authenticate: Bearer resource_metadata="…", scope="notes:read notes:write"` (RFC 9728 §5.1;
  `error="invalid_token"` only when a token was sent, RFC 6750 §3.1);
- reads the JSON-RPC body of a POST, and answers a `tools/call` of a tool whose scope the token lacks
  with 403 `error="insufficient_scope"` and the scopes to ask for (the token's plus the missing ones),
  so a client can step up (MCP authorization, "Scope challenge handling").
The token itself is checked before this gate by the SDK's `BearerAuthBackend`.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servers.notes_oauth import scopes


class McpAccessGate:
    def __init__(self, app: ASGIApp, *, path: str, resource_metadata_url: str) -> None:
        self.app = app
        self.path = path
        self.resource_metadata_url = resource_metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            sent_token = any(
                name.lower() == b"authorization" and value.lower().startswith(b"bearer ")
                for name, value in scope["headers"]
            )
            await self._refuse(send, 401, scopes.EVERYDAY, invalid=sent_token)
            return
        if scope["method"] == "POST":
            body, more = await _read_body(receive)
            # An oversized body is passed on unread: the SDK refuses it with 413 itself.
            missing = [] if more else _missing_scopes(body, user.scopes)
            if missing:
                wanted = [*user.scopes, *(s for s in missing if s not in user.scopes)]
                await self._refuse(send, 403, wanted, missing=missing)
                return
            receive = _replay(body, more, receive)
        await self.app(scope, receive, send)

    async def _refuse(
        self,
        send: Send,
        status: int,
        wanted: tuple[str, ...] | list[str],
        *,
        invalid: bool = False,
        missing: list[str] | None = None,
    ) -> None:
        parts: list[str] = []
        body: dict[str, str] = {}
        if missing:
            description = f"this call needs the scope {' '.join(missing)}"
            parts += ['error="insufficient_scope"', f'error_description="{description}"']
            body = {"error": "insufficient_scope", "error_description": description}
        elif invalid:
            description = "the access token is unknown, expired, revoked or for another server"
            parts += ['error="invalid_token"', f'error_description="{description}"']
            body = {"error": "invalid_token", "error_description": description}
        else:
            body = {
                "error": "unauthorized",
                "error_description": "sign in first: this server needs a bearer token",
            }
        parts += [f'resource_metadata="{self.resource_metadata_url}"', f'scope="{" ".join(wanted)}"']
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"www-authenticate", ("Bearer " + ", ".join(parts)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body, and whether more follows (it stops reading past the SDK's size limit)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        more = bool(message.get("more_body", False))
        if not more or size > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return b"".join(chunks), more


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    """A `receive` that hands the already-read body on, then defers to the real one."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": more}

    return replay


def _missing_scopes(body: bytes, granted: list[str]) -> list[str]:
    """The scopes the tool calls in a JSON-RPC body need and `granted` lacks (none if it is not JSON)."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    missing: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        if isinstance(tool, str):
            missing += [s for s in scopes.missing_scopes(tool, granted) if s not in missing]
    return missing

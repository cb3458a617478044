"""The authorization endpoint: a one-field sign-in page instead of a real identity provider.

`GET /authorize?…` checks the request and shows "Sign in to Notes as: [name] [Allow]"; the form posts
the name back to `/authorize` together with the original request in hidden inputs, and the answer is
a 302 to the client's redirect_uri with `code`, `state` and `iss` (RFC 9207). Whoever types a name is
that person: the page exists so tests and demos can sign in as anyone without passwords.

What the page enforces: a known client and one of its redirect URIs (otherwise an error page, never a
redirect), `response_type=code`, PKCE with `code_challenge_method=S256`, scopes the server knows, and
`resource` equal to the MCP server's URL (RFC 8707). Those last errors go back to the client.
"""

from __future__ import annotations

import html
import re

from mcp.server.auth.provider import AuthorizationParams, AuthorizeError, construct_redirect_uri
from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError
from pydantic import AnyUrl, ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from servers.notes_oauth import scopes
from servers.notes_oauth.clients import NotesClient
from servers.notes_oauth.provider import NotesAuthorizationServer

USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
# Fields of the sign-in form itself; everything else is the client's request, carried along.
FORM_FIELDS = ("user", "decision")
NO_STORE = {"Cache-Control": "no-store", "Content-Security-Policy": "frame-ancestors 'none'"}


class SignInPage:
    def __init__(self, server: NotesAuthorizationServer) -> None:
        self._server = server

    async def handle(self, request: Request) -> Response:
        fields = await _request_fields(request)
        if fields is None:
            return _error_page("Each parameter may appear only once (RFC 6749 §3.1).")
        client_id = fields.get("client_id", "")
        client = await self._server.get_client(client_id) if client_id else None
        if client is None:
            return _error_page(
                f"Unknown client_id {client_id!r}: register the client first, or use an https URL of a "
                "client metadata document."
            )
        raw_redirect = fields.get("redirect_uri")
        try:
            redirect_uri = client.validate_redirect_uri(AnyUrl(raw_redirect) if raw_redirect else None)
        except (ValidationError, InvalidRedirectUriError) as exc:
            message = exc.message if isinstance(exc, InvalidRedirectUriError) else "redirect_uri is not a URL"
            return _error_page(f"Cannot send you back to the application: {message}.")

        def back(**answer: str | None) -> Response:
            location = construct_redirect_uri(
                str(redirect_uri), **answer, state=fields.get("state"), iss=self._server.issuer
            )
            return RedirectResponse(location, status_code=302, headers=NO_STORE)

        try:
            params = self._checked_request(client, redirect_uri, fields, raw_redirect is not None)
        except AuthorizeError as exc:
            return back(error=exc.error, error_description=exc.error_description)

        if request.method == "GET" or "user" not in fields:
            return _consent_page(client, fields, params)
        if fields.get("decision") == "deny":
            return back(error="access_denied", error_description="the person declined to sign in")
        user = fields["user"].strip()
        if not USER_NAME.fullmatch(user):
            hint = "Use 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit."
            return _consent_page(client, fields, params, problem=hint, status_code=400)
        code = await self._server.issue_code(client, params, user)
        return back(code=code)

    def _checked_request(
        self, client: NotesClient, redirect_uri: AnyUrl, fields: dict[str, str], explicit_redirect: bool
    ) -> AuthorizationParams:
        if fields.get("response_type") != "code":
            raise AuthorizeError("unsupported_response_type", "response_type must be 'code'")
        challenge = fields.get("code_challenge", "")
        if fields.get("code_challenge_method") != "S256" or not S256_CHALLENGE.fullmatch(challenge):
            raise AuthorizeError(
                "invalid_request",
                "PKCE is required: code_challenge_method=S256 and a 43-character code_challenge",
            )
        try:
            requested = client.validate_scope(fields.get("scope"))
        except InvalidScopeError as exc:
            raise AuthorizeError("invalid_scope", exc.message) from exc
        if not self._server.is_this_resource(fields.get("resource", "")):
            raise AuthorizeError(
                "invalid_target", f"resource must be this MCP server, {self._server.resource} (RFC 8707)"
            )
        return AuthorizationParams(
            state=fields.get("state"),
            scopes=requested,
            code_challenge=challenge,
            redirect_uri=redirect_uri,
            redirect_uri_provided_explicitly=explicit_redirect,
            resource=self._server.resource,
        )


async def _request_fields(request: Request) -> dict[str, str] | None:
    """The request's parameters, from the query (GET) or the form (POST); None if one is repeated."""
    source = request.query_params if request.method == "GET" else await request.form()
    fields: dict[str, str] = {}
    for key, value in source.multi_items():
        if key in fields:
            return None
        if isinstance(value, str):
            fields[key] = value
    return fields


def _consent_page(
    client: NotesClient,
    fields: dict[str, str],
    params: AuthorizationParams,
    *,
    problem: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    hidden = "\n".join(
        f'<input type="hidden" name="{html.escape(key)}" value="{html.escape(value)}">'
        for key, value in fields.items()
        if key not in FORM_FIELDS
    )
    who = html.escape(client.client_name or client.client_id)
    granted = html.escape(" ".join(params.scopes or scopes.DEFAULT))
    note = f'<p class="problem">{html.escape(problem)}</p>' if problem else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to Notes</title></head>
<body>
<h1>Notes</h1>
<p>{who} asks to use your notes ({granted}).</p>
{note}
<form method="post" action="/authorize">
{hidden}
<label>Sign in to Notes as: <input name="user" autofocus required></label>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>
</body></html>
"""
    return HTMLResponse(page, status_code=status_code, headers=NO_STORE)


def _error_page(message: str) -> HTMLResponse:
    page = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Notes: sign-in failed</title>'
        f"</head>\n<body><h1>Cannot sign in</h1><p>{html.escape(message)}</p></body></html>\n"
    )
    return HTMLResponse(page, status_code=400, headers=NO_STORE)

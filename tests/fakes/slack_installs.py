"""The fake Slack's workspaces and its side of "Add to Slack" (OAuth v2), as Bolt's flow expects it.

`add_workspace` makes a workspace with its own bot token; auth.test answers each token with its own
workspace (an unknown token keeps the fake's default answer). `installing` names the workspace the
authorization page installs into: GET /oauth/v2/authorize checks the client id, then redirects to the
`redirect_uri` with a single-use code and the `state` it was given, as Slack does once the person
clicks Allow; oauth.v2.access trades the code (with the app's client id and secret) for the bot
token. Every call's token is kept in `tokens`, so a test sees which workspace's token each call used.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

APP_ID = "A0000APP"


@dataclass(slots=True)
class FakeWorkspace:
    team_id: str
    name: str
    token: str
    bot_user_id: str
    bot_id: str
    enterprise_id: str | None = None
    # An organization-wide install (Enterprise Grid): the install names the organization, not a team.
    org_wide: bool = False


@dataclass
class FakeInstalls:
    """Workspaces by token, the app's credentials, and the codes the authorization page gave out."""

    client_id: str = "111.222"
    client_secret: str = "fake-client-secret"
    workspaces: dict[str, FakeWorkspace] = field(default_factory=dict)
    installing: FakeWorkspace | None = None
    # (method, token, body) of every Web API call, in order.
    tokens: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    # Where the authorization page sends the browser back when the request names no redirect_uri
    # (the app's configured Redirect URL, as Slack does).
    redirect_uri: str | None = None
    # The scopes each authorization page visit asked for.
    asked_scopes: list[list[str]] = field(default_factory=list)
    _codes: dict[str, FakeWorkspace] = field(default_factory=dict)

    def add_workspace(
        self,
        team_id: str,
        *,
        name: str | None = None,
        enterprise_id: str | None = None,
        org_wide: bool = False,
    ) -> FakeWorkspace:
        workspace = FakeWorkspace(
            team_id=team_id,
            name=name or f"Team {team_id}",
            token=f"xoxb-{team_id}-{secrets.token_hex(8)}",
            bot_user_id=f"UBOT{team_id[-4:]}",
            bot_id=f"BBOT{team_id[-4:]}",
            enterprise_id=enterprise_id,
            org_wide=org_wide,
        )
        self.workspaces[workspace.token] = workspace
        return workspace

    def used(self, method: str) -> list[str | None]:
        """The tokens calls of `method` were made with, in order."""
        return [token for called, token, _ in self.tokens if called == method]

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/oauth/v2/authorize", self._authorize)

    def url(self, base: str) -> str:
        return f"{base}/oauth/v2/authorize"

    async def _authorize(self, request: web.Request) -> web.Response:
        query = request.query
        if query.get("client_id") != self.client_id:
            return web.Response(status=400, text="invalid client_id")
        redirect, state = query.get("redirect_uri") or self.redirect_uri, query.get("state")
        if not redirect or not state or self.installing is None:
            return web.Response(status=400, text="missing redirect_uri or state, or nothing to install into")
        self.asked_scopes.append(query.get("scope", "").split(","))
        code = secrets.token_hex(8)
        self._codes[code] = self.installing
        raise web.HTTPFound(f"{redirect}?{urlencode({'code': code, 'state': state})}")

    def answer(
        self, method: str, body: dict[str, Any], token: str | None, auth: str | None
    ) -> dict[str, Any] | None:
        """The answer to auth.test for a workspace's token, or to oauth.v2.access; None: not ours."""
        if method == "auth.test" and token in self.workspaces:
            workspace = self.workspaces[token]
            return {
                "ok": True,
                "url": f"https://{workspace.team_id.lower()}.slack.com/",
                "team": workspace.name,
                "user": "nerve",
                "team_id": workspace.team_id,
                "user_id": workspace.bot_user_id,
                "bot_id": workspace.bot_id,
                "enterprise_id": workspace.enterprise_id,
                "is_enterprise_install": workspace.org_wide,
            }
        if method == "oauth.v2.access":
            return self._access(body, auth)
        return None

    def _access(self, body: dict[str, Any], auth: str | None) -> dict[str, Any]:
        client_id, client_secret = body.get("client_id"), body.get("client_secret")
        if auth and auth.startswith("Basic "):
            client_id, _, client_secret = base64.b64decode(auth[6:]).decode().partition(":")
        if (client_id, client_secret) != (self.client_id, self.client_secret):
            return {"ok": False, "error": "invalid_client_id"}
        workspace = self._codes.pop(str(body.get("code") or ""), None)
        if workspace is None:
            return {"ok": False, "error": "invalid_code"}
        enterprise = (
            {"id": workspace.enterprise_id, "name": f"Org {workspace.enterprise_id}"}
            if workspace.enterprise_id
            else None
        )
        return {
            "ok": True,
            "app_id": APP_ID,
            "authed_user": {"id": "U0INSTALLER"},
            "scope": ",".join(self.asked_scopes[-1]) if self.asked_scopes else "",
            "token_type": "bot",
            "access_token": workspace.token,
            "bot_user_id": workspace.bot_user_id,
            "team": None if workspace.org_wide else {"id": workspace.team_id, "name": workspace.name},
            "enterprise": enterprise,
            "is_enterprise_install": workspace.org_wide,
        }

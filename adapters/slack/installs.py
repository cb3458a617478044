"""Installs in many workspaces ("Add to Slack"): Bolt's own OAuth flow, over nerve's database.

Bolt runs the OAuth v2 install (`/slack/install`, `/slack/oauth_redirect`, the state checked against
both its store and the browser's cookie) and answers each event with its own workspace's token
(its `authorize` reads this installation store). The installations go into the store sealed with
NERVE_SECRET_KEY (`Agent.installs`), keyed by team, or by organization for an organization-wide
install: a lookup must name the same organization, so two Enterprise Grid orgs never share one.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from adapters.slack.client import TeamEntry, workspace_token
from adapters.slack.settings import SlackSettings
from bot.agent import Install, WorkspaceInstalls
from bot.errors import ConfigError

logger = logging.getLogger(__name__)

PLATFORM = "slack"
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
# How long a person has between "Add to Slack" and coming back from Slack's page.
STATE_SECONDS = 600
# The bot scopes the Slack app manifests (slack/manifest.*.yaml) ask for; an install asks for them all.
DEFAULT_SCOPES = (
    "app_mentions:read",
    "assistant:write",
    "channels:history",
    "chat:write",
    "commands",
    "files:read",
    "files:write",
    "groups:history",
    "im:history",
    "im:read",
    "im:write",
    "mpim:history",
    "reactions:write",
    "users:read",
)


class OrgInstallRefused(ConfigError):
    """An organization-wide install, while SLACK_ALLOW_ORG_INSTALL is off."""


def oauth_on(settings: SlackSettings) -> bool:
    """Whether installs in many workspaces are set up (else the single SLACK_BOT_TOKEN, as before)."""
    return bool(settings.slack_client_id)


def _workspace(enterprise_id: str | None, team_id: str | None, org_wide: bool | None) -> str | None:
    return (enterprise_id if org_wide else team_id) or None


# Where an organization-wide install keeps the teams its events came from (Bolt's custom values).
TEAMS_SEEN = "nerve_teams_seen"


def _teams_of(value: dict[str, Any]) -> list[str]:
    return [str(team) for team in (value.get("custom_values") or {}).get(TEAMS_SEEN) or []]


def delivery_team(body: dict[str, Any]) -> str:
    """The workspace a delivery happened in, as its conversation keys name it (an org-wide install's
    authorizations name no team)."""
    event, team, user = body.get("event"), body.get("team"), body.get("user")
    found = (
        body.get("team_id")
        or (event.get("team") if isinstance(event, dict) else None)
        or (team.get("id") if isinstance(team, dict) else None)
        or (user.get("team_id") if isinstance(user, dict) else None)
    )
    return str(found or "")


def _plain(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


def _as_value(installation: Installation) -> dict[str, Any]:
    value = {key: _plain(item) for key, item in installation.to_dict_for_copying().items()}
    for key in ("bot_token_expires_at", "user_token_expires_at"):
        if value.get(key) is not None:
            value[key] = int(value[key])
    return value


class InstallationStore(AsyncInstallationStore):
    """Bolt's installation store on nerve's database; one installation (the latest) per workspace."""

    def __init__(self, installs: WorkspaceInstalls, *, allow_org: bool) -> None:
        self._installs = installs
        self._allow_org = allow_org
        # (organization, team) already recorded with the organization's install, in this process.
        self._seen: set[tuple[str, str]] = set()

    @property
    def logger(self) -> logging.Logger:
        return logger

    async def async_save(self, installation: Installation) -> None:
        org_wide = bool(installation.is_enterprise_install)
        if org_wide and not self._allow_org:
            logger.warning("refused an organization-wide install for %s", installation.enterprise_id)
            raise OrgInstallRefused(
                f"an organization-wide install ({installation.enterprise_id}) is refused:"
                " set SLACK_ALLOW_ORG_INSTALL=true to accept one"
            )
        workspace = _workspace(installation.enterprise_id, installation.team_id, org_wide)
        if workspace is None:
            raise ConfigError("Slack's install names no workspace")
        name = (installation.enterprise_name if org_wide else installation.team_name) or ""
        await self._installs.keep(
            PLATFORM,
            workspace,
            _as_value(installation),
            enterprise=installation.enterprise_id or "",
            org_wide=org_wide,
            name=name,
        )
        logger.info("installed in Slack workspace %s (%s)", workspace, name or "no name")

    async def async_save_bot(self, bot: Bot) -> None:
        # A rotated bot token: keep it in the installation it belongs to.
        found = await self.async_find_installation(
            enterprise_id=bot.enterprise_id,
            team_id=bot.team_id,
            is_enterprise_install=bot.is_enterprise_install,
        )
        if found is not None:
            found.bot_token, found.bot_refresh_token = bot.bot_token, bot.bot_refresh_token
            found.bot_token_expires_at = bot.bot_token_expires_at
            await self.async_save(found)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        workspace = _workspace(enterprise_id, team_id, is_enterprise_install)
        found = await self._installs.find(PLATFORM, workspace) if workspace else None
        if found is None and not is_enterprise_install and enterprise_id and self._allow_org:
            # A workspace of an organization the app was installed in as a whole.
            found = await self._installs.find(PLATFORM, enterprise_id)
            found = found if found is not None and found.org_wide else None
        if found is None or found.enterprise != (enterprise_id or ""):
            return None  # never another organization's install
        return Installation(**found.value)

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        found = await self.async_find_installation(
            enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
        )
        return found.to_bot() if found is not None and found.bot_token else None

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self.async_delete_installation(enterprise_id=enterprise_id, team_id=team_id)

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        await self.forget(enterprise_id, team_id)

    async def forget(self, enterprise_id: str | None, team_id: str | None) -> bool:
        """Delete the install that answers for this team (its own, or its organization's)."""
        for workspace in (team_id, enterprise_id):
            if not workspace:
                continue
            found = await self._installs.find(PLATFORM, workspace)
            if found is not None and found.enterprise == (enterprise_id or ""):
                return await self._installs.forget(PLATFORM, workspace)
        return False

    async def leave_team(self, enterprise_id: str | None, team_id: str) -> str | None:
        """The app was removed from one workspace (`app_uninstalled_team`, `team_access_revoked`): its
        own install is deleted (the organization's, when `team_id` names the organization); a workspace
        of an organization-wide install is no longer answered for with the organization's token, which
        stays for its other workspaces. What changed, or None when nothing answered for that team."""
        org = enterprise_id or ""
        found = await self._installs.find(PLATFORM, team_id)
        if found is not None and found.enterprise == org:
            return "its install is deleted" if await self._installs.forget(PLATFORM, team_id) else None
        self._seen.discard((org, team_id))
        found = await self._installs.find(PLATFORM, org) if org else None
        if found is None or not found.org_wide or team_id not in _teams_of(found.value):
            return None
        await self._keep_teams(found, [team for team in _teams_of(found.value) if team != team_id])
        return f"the install of organization {org} no longer answers for it"

    async def _keep_teams(self, found: Install, teams: list[str]) -> None:
        """Store an organization-wide install with the workspaces its events came from."""
        custom = {**(found.value.get("custom_values") or {}), TEAMS_SEEN: teams}
        value = {**found.value, "custom_values": custom}
        await self._installs.keep(
            PLATFORM, found.workspace, value, enterprise=found.enterprise, org_wide=True, name=found.name
        )

    async def bot_token(self, team_id: str) -> str | None:
        """The bot token answering for `team_id` (work that did not come with an event: a resumed
        approval, a schedule, a recovered event): its own install's, else that of the organization-wide
        install it was seen in."""
        found = await self._installs.find(PLATFORM, team_id)
        if found is None and self._allow_org:
            orgs = [i for i in await self._installs.all(PLATFORM) if i.org_wide]
            found = next((i for i in orgs if team_id in _teams_of(i.value)), None)
        return str(found.value.get("bot_token") or "") or None if found is not None else None

    async def seen_in_org(self, enterprise_id: str, team_id: str) -> None:
        """A workspace of an organization-wide install had an event: later work for that team (which
        its conversation keys name) finds the organization's install."""
        if (enterprise_id, team_id) in self._seen:
            return
        found = await self._installs.find(PLATFORM, enterprise_id)
        if found is None or not found.org_wide or found.enterprise != enterprise_id:
            return
        teams = _teams_of(found.value)
        if team_id not in teams:
            await self._keep_teams(found, [*teams, team_id])
        self._seen.add((enterprise_id, team_id))


async def left_teams(store: InstallationStore, body: dict[str, Any], enterprise_id: str | None) -> None:
    """`app_uninstalled_team` (one team) or `team_access_revoked` (several): the app is gone from
    those workspaces of an organization, and each is no longer answered (one log line each)."""
    event = body.get("event") or {}
    app, ours = event.get("app_id"), body.get("api_app_id")
    if app and ours and app != ours:
        return  # an organization's admin events name every app removed, not only this one
    kind = str(event.get("type"))
    teams = event.get("team_ids") if kind == "team_access_revoked" else [event.get("team_id")]
    for team in [str(t) for t in teams or [] if t]:
        done = await store.leave_team(body.get("enterprise_id") or enterprise_id, team)
        if done is not None:
            logger.warning("Slack workspace %s: %s, %s", team, kind, done)


class StateStore(AsyncOAuthStateStore):
    """Bolt's OAuth state store on nerve's database: each state good once, for STATE_SECONDS."""

    def __init__(self, installs: WorkspaceInstalls) -> None:
        self._installs = installs

    @property
    def logger(self) -> logging.Logger:
        return logger

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(32)
        await self._installs.issue_state(state, STATE_SECONDS)
        return state

    async def async_consume(self, state: str) -> bool:
        taken = await self._installs.take_state(state)
        if not taken:
            logger.warning("refused an install: its state is unknown, used or expired")
        return taken


def oauth_settings(settings: SlackSettings, installs: WorkspaceInstalls | None) -> AsyncOAuthSettings:
    """Bolt's OAuth settings for "Add to Slack"; a ConfigError names what is missing."""
    if installs is None:
        raise ConfigError(
            "SLACK_CLIENT_ID is set (installs in many workspaces), whose tokens are stored encrypted:"
            " set NERVE_SECRET_KEY (`nerve secret-key` prints a new one)"
        )
    if settings.slack_client_secret is None:
        raise ConfigError(
            "SLACK_CLIENT_ID is set: set SLACK_CLIENT_SECRET too (Basic Information → App Credentials)"
        )
    public = (settings.nerve_public_url or "").rstrip("/")
    scopes = [s.strip() for s in (settings.slack_scopes or ",".join(DEFAULT_SCOPES)).split(",") if s.strip()]
    return AsyncOAuthSettings(
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret.get_secret_value(),
        scopes=scopes,
        redirect_uri=f"{public}{REDIRECT_PATH}" if public else None,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        install_page_rendering_enabled=False,
        authorization_url=settings.slack_authorize_url,
        installation_store=InstallationStore(installs, allow_org=settings.slack_allow_org_install),
        installation_store_bot_only=True,
        state_store=StateStore(installs),
        state_expiration_seconds=STATE_SECONDS,
        logger=logger,
    )


def team_entry(store: InstallationStore) -> TeamEntry:
    """Work for a team (a resumed approval, a schedule, a recovered event) runs with its bot token."""

    @asynccontextmanager
    async def enter(team: str) -> AsyncIterator[None]:
        token = await store.bot_token(team) if team else None
        if token is None:
            logger.warning("no install answers for Slack workspace %s (uninstalled?)", team or "(none)")
        with workspace_token(token):
            yield

    return enter

"""The Slack checks: the bot token (auth.test), its scopes against those nerve's features use, and
how events will arrive, with the calls and words `nerve slack` starts with (`adapters.slack.serve`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

from slack_sdk.web.async_client import AsyncWebClient

from adapters.doctor.report import Check, error, ok, warning
from adapters.settings import Settings
from adapters.slack.client import make_client, reaching_slack, require_bot_token
from adapters.slack.installs import INSTALL_PATH, PLATFORM, oauth_on
from adapters.slack.serve import EVENTS_PATH, check_settings
from bot.errors import ConfigError, NerveError, StartupError

# Each bot scope the Slack app manifests (slack/manifest.*.yaml) ask for, and what goes missing
# without it. tests/test_deploy.py holds the manifests to exactly this list.
NEEDED_SCOPES = {
    "app_mentions:read": "hearing mentions",
    "assistant:write": "agent sessions (or the assistant pane's status) and suggested prompts",
    "channels:history": "following threads in public channels",
    "chat:write": "posting answers",
    "commands": "the /nerve command",
    "files:read": "reading files people share with a message",
    "files:write": "uploading files tools return",
    "groups:history": "following threads in private channels",
    "im:history": "reading direct messages",
    "im:read": "seeing direct-message channels",
    "im:write": "starting direct messages",
    "mpim:history": "reading group direct messages",
    "reactions:write": "the 👀 a mention shows at once while nerve works on it",
    "users:read": "each person's time zone from their Slack profile, for their schedules",
}
SLACK_LIMIT = 15.0
AGENT_EXPERIENCE = (
    "the Agent messaging experience (SLACK_EXPERIENCE=agent): the app is made from "
    "slack/manifest.socket.yaml or manifest.http.yaml"
)
REACH = "check the network, or SLACK_API_BASE_URL if you set it"


async def check_slack(settings: Settings) -> list[Check]:
    if oauth_on(settings):
        client = make_client(settings)
        return [*await _installed(settings, client), await _events(settings, client)]
    try:
        require_bot_token(settings)
    except ConfigError as exc:
        return [error("slack", "SLACK_BOT_TOKEN is not set, but other Slack settings are", exc.message)]
    client = make_client(settings)
    checks: list[Check] = []
    try:
        async with reaching_slack(settings, "SLACK_BOT_TOKEN"), asyncio.timeout(SLACK_LIMIT):
            auth = await client.auth_test()
    except ConfigError as exc:
        todo = "copy the Bot User OAuth Token (xoxb-…) again from the Slack app (OAuth & Permissions)"
        checks.append(error("slack", exc.message, todo))
    except StartupError as exc:
        checks.append(error("slack", exc.message, REACH))
    else:
        found = f"SLACK_BOT_TOKEN works: {auth.get('user')} in the workspace {auth.get('team')}"
        checks += [ok("slack", found), _scopes(auth.headers)]
    checks.append(await _events(settings, client))
    checks.append(experience(settings))
    return checks


def experience(settings: Settings) -> Check:
    """Which of Slack's surfaces for AI apps nerve serves (SLACK_EXPERIENCE), and the manifest that
    makes the app for it: Slack's API cannot tell a bot token which one the app was made with."""
    if settings.slack_experience == "assistant":
        return warning(
            "slack experience",
            "the Assistant experience (SLACK_EXPERIENCE=assistant; the app is made from "
            "slack/manifest.assistant.*.yaml, with assistant_view)",
            "Slack will deprecate assistant_view: move the app to slack/manifest.socket.yaml or "
            "manifest.http.yaml (agent_view) and unset SLACK_EXPERIENCE",
        )
    return ok("slack experience", AGENT_EXPERIENCE)


async def _installed(settings: Settings, client: AsyncWebClient) -> list[Check]:
    """ "Add to Slack": each installed workspace, its token asked (auth.test) and its scopes checked."""
    from bot.installs import workspace_installs
    from bot.runtime import open_store

    secret_key = settings.nerve_secret_key.get_secret_value() if settings.nerve_secret_key else None
    install_page = f"{(settings.nerve_public_url or 'NERVE_PUBLIC_URL').rstrip('/')}{INSTALL_PATH}"
    async with open_store(settings) as store:
        installs = workspace_installs(store, secret_key)
        if installs is None:
            todo = "set NERVE_SECRET_KEY (`nerve secret-key` prints one): installs are stored encrypted"
            return [error("slack installs", "SLACK_CLIENT_ID is set but NERVE_SECRET_KEY is not", todo)]
        found = await installs.all(PLATFORM)
    if not found:
        return [warning("slack installs", "no workspace has installed nerve yet", f"open {install_page}")]
    checks = [ok("slack installs", f"{len(found)} workspace(s): " + ", ".join(i.workspace for i in found))]
    for install in found:
        where = f"{install.workspace} ({install.name or 'no name'})"
        token = str(install.value.get("bot_token") or "")
        try:
            async with reaching_slack(settings, f"the token of {where}"), asyncio.timeout(SLACK_LIMIT):
                auth = await client.auth_test(token=token)
        except ConfigError as exc:
            checks.append(error("slack workspace", exc.message, f"install nerve again there: {install_page}"))
        except StartupError as exc:
            checks.append(error("slack workspace", exc.message, REACH))
        else:
            checks.append(ok("slack workspace", f"{where}: the token works as {auth.get('user')}"))
            scopes = _scopes(auth.headers, f"the token of {where}")
            checks.append(replace(scopes, found=f"{where}: {scopes.found}"))
    return checks


def _scopes(headers: Mapping[str, object], token_name: str = "SLACK_BOT_TOKEN") -> Check:
    granted_header = next((str(v) for k, v in headers.items() if k.lower() == "x-oauth-scopes"), None)
    todo = (
        "add them under OAuth & Permissions → Bot Token Scopes (slack/manifest.socket.yaml lists them all), "
        "then reinstall the app to the workspace"
    )
    if granted_header is None:
        return warning("slack scopes", f"Slack did not say which scopes {token_name} has", todo)
    granted = {scope.strip() for scope in granted_header.split(",")}
    missing = [scope for scope in NEEDED_SCOPES if scope not in granted]
    if not missing:
        return ok("slack scopes", f"all {len(NEEDED_SCOPES)} scopes nerve uses are granted")
    named = ", ".join(f"{scope} ({NEEDED_SCOPES[scope]})" for scope in missing)
    return warning("slack scopes", f"missing {named}", todo)


async def _events(settings: Settings, client: AsyncWebClient) -> Check:
    """Socket Mode (the app token, tried as `nerve slack` tries it) or the Events API over HTTP."""
    try:
        check_settings(settings)
    except ConfigError as exc:
        return error("slack events", "nerve has no way to receive Slack events", exc.message)
    if settings.slack_app_token is None:
        url = f"http://{settings.nerve_http_host}:{settings.nerve_http_port}{EVENTS_PATH}"
        found = f"Events API over HTTP at {url} (SLACK_SIGNING_SECRET set); Slack must reach it at your URL"
        return ok("slack events", found)
    try:
        async with reaching_slack(settings, "SLACK_APP_TOKEN"), asyncio.timeout(SLACK_LIMIT):
            await client.apps_connections_open(app_token=settings.slack_app_token.get_secret_value())
    except NerveError as exc:
        todo = REACH
        if isinstance(exc, ConfigError):
            todo = "create an app-level token with connections:write (Basic Information → App-Level Tokens)"
        return error("slack events", exc.message, todo)
    unused = "; SLACK_SIGNING_SECRET is not used" if settings.slack_signing_secret else ""
    return ok("slack events", f"Socket Mode: SLACK_APP_TOKEN works{unused}")

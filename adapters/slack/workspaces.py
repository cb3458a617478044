"""What Slack tells the bot about the workspaces it is in: the workspace each delivery comes from
(whose token its work calls Slack with), and the app leaving one (uninstalled, its bot token revoked,
removed from a workspace of an Enterprise Grid organization).

Apart from the bot's assembly (`adapters.slack.app`) because these listeners answer no one: they keep
the installation store (`adapters.slack.installs`) true to where the app is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from adapters.slack.client import use_workspace_token
from adapters.slack.installs import InstallationStore, delivery_team, left_teams

logger = logging.getLogger(__name__)


class WorkspaceEvents:
    """The middleware and listeners of installs; `installs` is None with the one SLACK_BOT_TOKEN."""

    def __init__(self, installs: InstallationStore | None) -> None:
        self.installs = installs

    async def use_workspace(
        self, body: dict[str, Any], context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
    ) -> None:
        # Everything this delivery starts (its turn, its clicks' work) calls Slack with the token Bolt
        # found for the delivery's workspace.
        use_workspace_token(context.bot_token)
        team = delivery_team(body)
        if self.installs is not None and context.is_enterprise_install and context.enterprise_id and team:
            await self.installs.seen_in_org(context.enterprise_id, team)
        await next()

    async def on_uninstalled(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        enterprise, team = body.get("enterprise_id"), body.get("team_id")
        event = body.get("event") or {}
        if event.get("type") == "tokens_revoked" and not (event.get("tokens") or {}).get("bot"):
            return  # people's own tokens only: the bot's install stands
        if self.installs is None:
            logger.warning("Slack workspace %s: %s, SLACK_BOT_TOKEN no longer works", team, event.get("type"))
            return
        gone = await self.installs.forget(enterprise, team)
        if gone:
            kind = event.get("type") or "uninstall"
            logger.warning("Slack workspace %s: %s, its install is deleted", team or enterprise, kind)

    async def on_left_teams(self, ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        await ack()
        assert self.installs is not None
        await left_teams(self.installs, body, context.enterprise_id)

"""The Slack front end's settings: its tokens, its Web API address, and which messages it answers.

Read from the same environment and `.env` as the core's (`bot.config.SETTINGS_SOURCES`, inherited).
"""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr

from bot.config import Settings


class SlackSettings(Settings):
    """What `nerve slack` and `nerve worker` read: the core's settings and Slack's own."""

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_api_base_url: str = "https://slack.com/api/"
    nerve_slack_follow_threads: bool = False
    nerve_slack_allow_bots: bool = False
    # Which of Slack's surfaces for AI apps the app was made with (its manifest says): the Agent
    # messaging experience (`agent_view`: agent sessions, their stop button), or the older Assistant
    # experience (`assistant_view`: assistant threads and their status line).
    slack_experience: Literal["agent", "assistant"] = "agent"
    # "Add to Slack" (installs in many workspaces): the app's credentials; without them, the one
    # workspace of SLACK_BOT_TOKEN.
    slack_client_id: str | None = None
    slack_client_secret: SecretStr | None = None
    # The bot scopes an install asks for, comma-separated (default: those of nerve's manifests).
    slack_scopes: str | None = None
    # Whether an Enterprise Grid organization may install the app for all its workspaces at once.
    slack_allow_org_install: bool = False
    # Slack's authorization page (a stand-in's in tests); Bolt's default when unset.
    slack_authorize_url: str = "https://slack.com/oauth/v2/authorize"

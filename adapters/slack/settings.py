"""The Slack front end's settings: its tokens, its Web API address, and which messages it answers.

Read from the same environment and `.env` as the core's (`bot.config.SETTINGS_SOURCES`, inherited).
"""

from __future__ import annotations

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

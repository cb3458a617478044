"""Which chat platforms this deployment sets up, read from the settings alone: several checks
change their verdict when Slack or Discord people would meet what the terminal user shrugs off."""

from __future__ import annotations

from adapters.settings import Settings


def slack_set_up(settings: Settings) -> bool:
    return any((settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret))


def platforms_set_up(settings: Settings) -> str:
    """'Slack', 'Discord', 'Slack and Discord', or '' when neither is."""
    found = [("Slack", slack_set_up(settings)), ("Discord", settings.discord_bot_token is not None)]
    return " and ".join(name for name, on in found if on)

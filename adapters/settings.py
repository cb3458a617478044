"""Every setting nerve reads: the core's (`bot.config.Settings`) and each platform's, in one object,
with the platforms' descriptions the core is built with (`adapters.platforms`).

The command line loads it once and passes it down; `nerve doctor` checks all of it at once.
"""

from __future__ import annotations

from typing import ClassVar

from adapters.discord.settings import DiscordSettings
from adapters.platforms import PLATFORMS
from adapters.slack.settings import SlackSettings
from bot.config import SETTINGS_SOURCES
from bot.types import Platforms


class Settings(DiscordSettings, SlackSettings):
    """The core's settings and the front ends'. `.env.example` lists each one with its default."""

    model_config = SETTINGS_SOURCES
    # The core is built with every platform's description, whichever front end runs.
    platforms: ClassVar[Platforms] = PLATFORMS

"""Every setting nerve reads, the core's and each platform's, in one object the command line loads
once (and `nerve doctor` checks at once).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ValidationError

from adapters.discord.platform import DISCORD
from adapters.discord.settings import DiscordSettings
from adapters.slack.platform import SLACK
from adapters.slack.settings import SlackSettings
from adapters.terminal.platform import TERMINAL
from bot.config import SETTINGS_SOURCES
from bot.types import Platforms

# The platforms nerve speaks on, joined for every front end alike: one servers file's policy names
# places on any of them.
PLATFORMS = Platforms((SLACK, DISCORD, TERMINAL))


class Settings(DiscordSettings, SlackSettings):
    """The core's settings and the front ends'. `.env.example` lists each one with its default."""

    model_config = SETTINGS_SOURCES
    # The core is built with every platform's description, whichever front end runs.
    platforms: ClassVar[Platforms] = PLATFORMS


def bad_setting(exc: ValidationError) -> str:
    """`bad setting: NAME: what is wrong; …`, worded alike by every command and `nerve doctor`."""
    return "bad setting: " + "; ".join(
        f"{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
    )

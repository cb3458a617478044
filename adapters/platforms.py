"""The platforms nerve speaks on, joined for every front end alike (`Settings.platforms`): one
servers file's policy names places on any of them.
"""

from __future__ import annotations

from adapters.discord.platform import DISCORD
from adapters.slack.platform import SLACK
from adapters.terminal.platform import TERMINAL
from bot.types import Platforms

PLATFORMS = Platforms((SLACK, DISCORD, TERMINAL))

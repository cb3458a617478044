"""The platforms nerve speaks on, as the core is built with them (`Settings.platforms`).

Each front end describes its own; this table joins them, in the order messages list them, for every
front end alike: one servers file's policy names places on any of them.
"""

from __future__ import annotations

from adapters.discord.platform import DISCORD
from adapters.slack.platform import SLACK
from adapters.terminal.platform import TERMINAL
from bot.types import Platforms

PLATFORMS = Platforms((SLACK, DISCORD, TERMINAL))

"""/usage on Discord: the person's use of the model today and this month and their limits (an
admin's adds the place's and the server's), to them alone (ephemeral)."""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from adapters.common.usage_words import usage_lines
from adapters.discord.commands import asked_here, slash
from adapters.discord.delivery import tell
from adapters.discord.render import escape_text
from bot.agent import Agent


def register(tree: app_commands.CommandTree[Any], agent: Agent) -> None:
    """Add /usage to the bot's tree (synced with the others in `setup_hook`)."""

    @slash(tree, "usage")
    async def usage(interaction: discord.Interaction[Any]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        lines = usage_lines(await agent.usage(asked_here(interaction)))
        await tell(interaction, escape_text("\n".join(lines)))

"""The slash commands: /ask, /tools, /reset, /help.

Each command acknowledges within Discord's 3-second deadline before doing anything slow: /ask and
/reset defer at once (a reset waits for a running turn in that conversation), /tools and /help
answer directly from memory.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import discord
from discord import app_commands

from adapters.discord.delivery import NO_MENTIONS
from adapters.discord.incoming import dm_key, thread_key
from bot.render import split_markdown, truncate
from bot.types import ConversationKey, ToolSpec


class CommandAgent(Protocol):
    async def reset(self, key: ConversationKey) -> None: ...

    def tools(self) -> list[ToolSpec]: ...


class CommandHost(Protocol):
    """What the commands need of the bot: a Protocol, so this module never imports the bot's module."""

    @property
    def agent(self) -> CommandAgent: ...

    @property
    def tree(self) -> app_commands.CommandTree[Any]: ...

    async def handle_ask(self, interaction: discord.Interaction[Any]) -> None: ...


logger = logging.getLogger(__name__)

HELP = """\
**nerve** answers questions with the help of tools.
• `/ask question:` — ask in a channel: I answer there and open a thread for follow-ups. In a DM I just answer.
• Mention me in a channel to do the same; mention me (or just write) in my threads to continue.
• DM me for a private conversation that no one else sees.
• `/tools` — what I can use right now. `/reset` — start over in this thread or DM.
Under each answer, **Tool results** shows what the tools returned (only to you)."""
RESET_NOWHERE = "There is no conversation to reset here: use /reset inside one of my threads or in a DM."
RESET_DONE = "Started a new conversation here: I no longer use what was said before."
NO_TOOLS = "No tools are available right now."


def reset_key(interaction: discord.Interaction[Any]) -> ConversationKey | None:
    """The conversation /reset applies to: this DM or this thread; none in a plain channel."""
    channel = interaction.channel
    if interaction.guild_id is None:
        return dm_key(interaction.channel_id or 0, interaction.user.id)
    if isinstance(channel, discord.Thread):
        return thread_key(interaction.guild_id, channel.parent_id, channel.id)
    return None


def tools_text(bot: CommandHost) -> list[str]:
    lines = []
    for tool in bot.agent.tools():
        description = truncate((tool.description.strip().splitlines() or [""])[0], 150)[0]
        lines.append(f"• **{tool.name}** — {description}" if description else f"• **{tool.name}**")
    return split_markdown("\n".join(lines), 2000) if lines else [NO_TOOLS]


def register(bot: CommandHost) -> None:
    """Add the commands to the bot's tree (synced to Discord in `setup_hook`)."""
    tree = bot.tree
    contexts = app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)

    @tree.command(name="ask", description="Ask nerve a question; in a channel I open a thread for follow-ups")
    @app_commands.describe(question="What you want to know")
    @contexts
    async def ask(interaction: discord.Interaction[Any], question: str) -> None:
        await bot.handle_ask(interaction)

    @tree.command(name="tools", description="List the tools nerve can use right now")
    @contexts
    async def tools(interaction: discord.Interaction[Any]) -> None:
        first, *rest = tools_text(bot)
        await interaction.response.send_message(first, ephemeral=True, allowed_mentions=NO_MENTIONS)
        for chunk in rest:
            await interaction.followup.send(chunk, ephemeral=True, allowed_mentions=NO_MENTIONS)

    @tree.command(name="reset", description="Start a new conversation in this thread or DM")
    @contexts
    async def reset(interaction: discord.Interaction[Any]) -> None:
        key = reset_key(interaction)
        if key is None:
            await interaction.response.send_message(
                RESET_NOWHERE, ephemeral=True, allowed_mentions=NO_MENTIONS
            )
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        await bot.agent.reset(key)
        await interaction.followup.send(RESET_DONE, ephemeral=True, allowed_mentions=NO_MENTIONS)

    @tree.command(name="help", description="How to use nerve")
    @contexts
    async def help_command(interaction: discord.Interaction[Any]) -> None:
        await interaction.response.send_message(HELP, ephemeral=True, allowed_mentions=NO_MENTIONS)

    @tree.error
    async def on_error(interaction: discord.Interaction[Any], error: app_commands.AppCommandError) -> None:
        logger.exception("slash command failed", exc_info=error)
        text = "Sorry — something went wrong on my side with that command. Please try again."
        try:
            if interaction.response.is_done():
                await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_MENTIONS)
            else:
                await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_MENTIONS)
        except discord.HTTPException:
            logger.warning("could not tell the user about the failed command either")

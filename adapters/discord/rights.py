"""/forget-me and /export on Discord: a person's data rights, answered to them alone (ephemeral), in
DMs and in servers.

Forgetting is asked first: the Delete button's custom_id carries the asker's user id, so a press
works in whichever process receives it, after a restart too, and only the asker's press counts. The
export is one JSON file attached to the private answer. What is stored and deleted is the façade's to
decide (`Agent.forget_person`, `Agent.export_person`).
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands

from adapters.common import rights
from adapters.discord.commands import asked_here, slash
from adapters.discord.delivery import ClickButton, tell, view_of
from bot.agent import Agent

logger = logging.getLogger(__name__)

# What a press does (f: forget, c: cancel) and whose question it answers.
TEMPLATE = r"nerve:rights:(?P<click>[fc]:[0-9]{1,25})"


class RightsButton(ClickButton, template=TEMPLATE):
    """A button of the /forget-me question; its press goes to the client's `RightsFlow`."""

    route, prefix, fallback = "rights_flow", "nerve:rights:", "Forget me"


def forget_question(user_id: str) -> tuple[str, discord.ui.View]:
    """What /forget-me asks first, with Delete and Cancel for `user_id` alone."""
    sure = RightsButton(f"f:{user_id}", label=rights.CONFIRM_FORGET, style=discord.ButtonStyle.danger)
    cancel = RightsButton(f"c:{user_id}", label=rights.CANCEL_FORGET)
    return rights.FORGET_QUESTION, view_of(sure, cancel)


@dataclass(eq=False)
class RightsFlow:
    """Presses on the /forget-me question for one Discord client: answered to the presser alone."""

    agent: Agent

    async def clicked(self, interaction: discord.Interaction[Any], click: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        what, _, asker = click.partition(":")
        if asker != str(interaction.user.id):
            await tell(interaction, rights.NOT_YOURS)
            return
        if what != "f":
            await tell(interaction, rights.NOTHING_DELETED)
            return
        here = asked_here(interaction)
        try:
            text = rights.forgotten_text(await self.agent.forget_person(here.key, here.user_id))
        except Exception:
            logger.exception("forgetting %s failed", here.user_id)
            text = rights.FORGET_FAILED
        await tell(interaction, text)


def register(tree: app_commands.CommandTree[Any], agent: Agent) -> None:
    """Add /forget-me and /export to the bot's tree (synced with the others in `setup_hook`)."""

    @slash(tree, "forget-me")
    async def forget_me(interaction: discord.Interaction[Any]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        text, view = forget_question(str(interaction.user.id))
        await tell(interaction, text, view)

    @slash(tree, "export")
    async def export(interaction: discord.Interaction[Any]) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        here = asked_here(interaction)
        try:
            document = await agent.export_person(here.key, here.user_id)
        except Exception:
            logger.exception("the export of %s failed", here.user_id)
            await tell(interaction, rights.EXPORT_FAILED)
            return
        data = io.BytesIO(rights.export_text(document).encode("utf-8"))
        await tell(
            interaction, rights.EXPORT_TITLE + ":", file=discord.File(data, filename=rights.EXPORT_NAME)
        )

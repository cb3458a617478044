"""The "Tool results" button: shows a reply's tool calls, ephemerally, to whoever clicks it.

Its custom_id carries only a reference to the reply (`nerve:tools:<ref>`), so the button keeps
working across restarts as a component (discord.py's `DynamicItem` routes any click whose
custom_id matches the template). The results themselves live in an in-memory LRU; when the
reference is gone (restart, or pushed out by newer replies) the click says so instead of failing.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import discord

from adapters.discord.delivery import NO_MENTIONS
from adapters.discord.render import ResultsCache, results_view

CUSTOM_ID_PREFIX = "nerve:tools:"
GONE = (
    "These tool results are no longer available (the bot restarted or they expired). "
    "Ask again to see fresh ones."
)


def new_ref() -> str:
    return secrets.token_hex(8)


def _cache_of(interaction: discord.Interaction[Any]) -> ResultsCache | None:
    cache = getattr(interaction.client, "results", None)
    return cache if isinstance(cache, ResultsCache) else None


class ToolResultsButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"nerve:tools:(?P<ref>[0-9a-f]{1,32})"
):
    """A persistent button; the click is answered within Discord's 3 seconds (nothing slow runs)."""

    def __init__(self, ref: str) -> None:
        super().__init__(
            discord.ui.Button(
                label="Tool results",
                style=discord.ButtonStyle.secondary,
                emoji="🔧",
                custom_id=CUSTOM_ID_PREFIX + ref,
            )
        )
        self.ref = ref

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ToolResultsButton:
        return cls(match["ref"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        cache = _cache_of(interaction)
        attachments = cache.get(self.ref) if cache is not None else None
        if attachments is None:
            await interaction.response.send_message(GONE, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        shown = results_view(attachments)
        file = shown.file()
        if file is not None:
            await interaction.response.send_message(
                shown.note, embeds=shown.embeds, file=file, ephemeral=True, allowed_mentions=NO_MENTIONS
            )
        else:
            await interaction.response.send_message(
                shown.note, embeds=shown.embeds, ephemeral=True, allowed_mentions=NO_MENTIONS
            )


def results_button_view(ref: str) -> discord.ui.View:
    """A view holding the button; no timeout, since the button must outlive this process."""
    view = discord.ui.View(timeout=None)
    view.add_item(ToolResultsButton(ref))
    return view

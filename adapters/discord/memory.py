"""/memory and the memory buttons on Discord: the person's list (ephemeral), Forget, Use anywhere,
Forget all (asked again first) and the Undo under an answer that saved a memory.

A renderer only: what may be seen and forgotten is the façade's to decide (`Agent.memories`,
`Agent.undo_memory`, …). A button's custom_id carries what its press needs (what to do, which
memory), so it works in whichever process receives it, after a restart too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands

from adapters.common import memory_words as words
from adapters.discord.commands import asked_here, slash
from adapters.discord.delivery import ClickButton, tell, view_of
from adapters.discord.render import safe_text
from bot.agent import Agent
from bot.text import truncate
from bot.types import Incoming, Memory, Remembered

logger = logging.getLogger(__name__)

# What a press does, by its code: undo, forget, use anywhere (id|on or id|off), ask to forget all,
# forget all.
TEMPLATE = r"nerve:mem:(?P<click>[ufaqz]:[A-Za-z0-9|]{1,40})"
BUTTONS = 25  # Discord's five rows of five
FAILED = "Sorry — something went wrong on my side with your memories; please try again."


class MemoryButton(ClickButton, template=TEMPLATE):
    """A memory button; its press goes to the client's `MemoryFlow`."""

    route, prefix, fallback = "memory_flow", "nerve:mem:", "Memory"


def undo_buttons(remembered: tuple[Remembered, ...]) -> list[MemoryButton]:
    """An Undo per memory an answer saved (its memory's id in the button)."""
    saved = remembered[: BUTTONS - 1]  # one place stays for the Tool results button
    return [MemoryButton(f"u:{m.id}", label=words.undo_label(m, len(saved)), emoji="↩️") for m in saved]


def _line(memory: Memory) -> str:
    marker = words.where_used(memory)
    text = safe_text(truncate(memory.text, 200)[0])
    return f"• `{memory.id}` {text}" + (f" — *{marker}*" if marker else "")


def memory_message(memories: list[Memory]) -> tuple[str, discord.ui.View | None]:
    """/memory: the person's own memories and the place's, with their ids and buttons."""
    parts = words.sections(memories)
    if not parts:
        return words.NOTHING, None
    lines: list[str] = []
    buttons: list[MemoryButton] = []
    danger, grey = discord.ButtonStyle.danger, discord.ButtonStyle.secondary
    for part in parts:
        lines.append(f"**{part.title}**")
        for memory in part.memories:
            lines.append(_line(memory))
            buttons.append(MemoryButton(f"f:{memory.id}", label=f"{words.FORGET} {memory.id}", style=danger))
            if memory.kind == "person":
                on = "off" if memory.anywhere else "on"
                label = words.DMS_ONLY_BUTTON if memory.anywhere else words.USE_ANYWHERE
                buttons.append(MemoryButton(f"a:{memory.id}|{on}", label=f"{label}: {memory.id}", style=grey))
    shown = buttons[: BUTTONS - 1]
    if any(m.kind == "person" for m in memories):
        shown.append(MemoryButton("q:all", label=words.FORGET_ALL, style=danger))
    if len(buttons) > BUTTONS - 1:
        lines.append("-# More than the buttons fit: `/memory` after forgetting some shows the rest.")
    return truncate("\n".join(lines), 2000)[0], view_of(*shown)


@dataclass(eq=False)
class MemoryFlow:
    """Memory button presses for one Discord client: answered to the presser alone."""

    agent: Agent

    async def clicked(self, interaction: discord.Interaction[Any], click: str) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        here = asked_here(interaction)
        try:
            text, view = await self._pressed(here, click)
        except Exception:
            logger.exception("a memory button failed for %s", here.user_id)
            text, view = FAILED, None
        await tell(interaction, text, view)

    async def _pressed(self, here: Incoming, click: str) -> tuple[str, discord.ui.View | None]:
        what, _, value = click.partition(":")
        if what == "u":
            return words.undone(await self.agent.undo_memory(here, value)), None
        if what == "f":
            return words.undone(await self.agent.undo_memory(here, value), undo=False), None
        if what == "a":
            memory_id, _, on = value.partition("|")
            changed = await self.agent.use_memory_anywhere(here, memory_id, on == "on")
            return words.anywhere_set(on == "on", changed), None
        if what == "q":
            mine = sum(1 for m in await self.agent.memories(here) if m.kind == "person")
            if not mine:
                return words.forgot_all(0), None
            sure = MemoryButton("z:all", label=words.CONFIRM_FORGET_ALL, style=discord.ButtonStyle.danger)
            return words.forget_all_question(mine), view_of(sure)
        return words.forgot_all(await self.agent.forget_my_memories(here)), None


def register(tree: app_commands.CommandTree[Any], agent: Agent) -> None:
    """Add /memory to the bot's tree (synced with the others in `setup_hook`)."""

    @slash(tree, "memory")
    async def memory(interaction: discord.Interaction[Any]) -> None:
        if agent.memory is None:
            await tell(interaction, words.MEMORY_OFF)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        text, view = memory_message(await agent.memories(asked_here(interaction)))
        await tell(interaction, text, view)

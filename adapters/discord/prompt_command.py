"""`/prompt name: arguments:` — a server's prompt started on Discord and answered as `/ask` is.

The server fills the prompt in; its text is then the question of an ordinary `/ask` turn (stored
first, answered live in the deferred message, a thread opened on it in a channel, approvals apply).
A mistake (an unknown prompt, a missing or unknown argument, a server that refuses) is told only to
the person when it is known within Discord's 3 seconds, which is always the case for what nerve
checks itself; a server slower than that is waited for behind a "thinking…" message, which then
says what went wrong.

Both options complete as people type: `name` from the prompts offered here, `arguments` from the
server's completion of the argument being typed (bounded, because Discord drops an autocomplete
answer after 3 seconds).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
from discord import app_commands

from adapters.discord.delivery import NO_MENTIONS
from adapters.discord.render import safe_text
from adapters.prompt_arguments import arguments_usage, completion_at_end, parse_arguments
from bot.agent import Agent
from bot.errors import PromptError
from bot.text import show_link_targets, truncate
from bot.types import Incoming, PromptSpec

logger = logging.getLogger(__name__)

# How long the command waits for the server's text before it defers (Discord allows 3 s).
ANSWER_WITHIN = 2.0
# How long an autocomplete waits for the server's completion (Discord allows 3 s).
COMPLETE_WITHIN = 2.0
CHOICES = 25  # Discord's limit per autocomplete answer
CHOICE_CHARS = 100  # Discord's limit on a choice's name and value


def offered(agent: Agent, here: Incoming, name: str) -> PromptSpec | None:
    """The prompt of that name, if this place may start it."""
    return next((p for p in agent.prompts(here) if p.name == name), None)


async def question_of(
    agent: Agent, interaction: discord.Interaction[Any], here: Incoming, name: str, written: str
) -> str | None:
    """The prompt's text, or None once the person was told why not. The interaction is answered by
    then only if the server took longer than `ANSWER_WITHIN` (it is deferred)."""
    spec = offered(agent, here, name)
    hint = ""
    if spec is not None and spec.arguments:
        hint = f"\nWrite it as `/prompt name:{spec.name} arguments:{arguments_usage(spec)}`"
    try:
        # An unknown name is left to the core, which names the prompts there are.
        arguments = parse_arguments(spec, written) if spec is not None else {}
    except PromptError as exc:
        await refuse(interaction, str(exc) + hint)
        return None
    question = asyncio.ensure_future(agent.prompt_question(here, name, arguments))
    try:
        done, _ = await asyncio.wait({question}, timeout=ANSWER_WITHIN)
        if not done:
            await interaction.response.defer(thinking=True)
        return await question
    except PromptError as exc:
        await refuse(interaction, str(exc) + hint)
        return None
    finally:
        question.cancel()


async def refuse(interaction: discord.Interaction[Any], text: str) -> None:
    """Say why the prompt did not start: to the person only, or in the "thinking…" message. A
    server's refusal is its own words, shown as an answer is (every link with its target)."""
    text = safe_text(truncate(text, 1900)[0])
    if interaction.response.is_done():
        await interaction.edit_original_response(content=text, allowed_mentions=NO_MENTIONS)
    else:
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=NO_MENTIONS)


def name_choices(agent: Agent, here: Incoming, current: str) -> list[app_commands.Choice[str]]:
    """The prompts offered here whose name or title holds what was typed, with what they do."""
    typed = current.strip().lower()
    choices = []
    for spec in agent.prompts(here):
        if len(spec.name) > CHOICE_CHARS or (
            typed not in spec.name.lower() and typed not in spec.title.lower()
        ):
            continue
        # Plain text on Discord, but the server's words all the same: a link shows its target.
        summary = show_link_targets((spec.description.strip().splitlines() or [""])[0])
        label = f"{spec.name} — {summary}" if summary else spec.name
        choices.append(app_commands.Choice(name=truncate(label, CHOICE_CHARS)[0], value=spec.name))
    return choices[:CHOICES]


async def argument_choices(
    agent: Agent, here: Incoming, name: str, current: str
) -> list[app_commands.Choice[str]]:
    """The arguments text completed where the server completes the value being typed at its end."""
    spec = offered(agent, here, name)
    target = completion_at_end(spec, current) if spec is not None else None
    if spec is None or target is None:
        return []
    try:
        async with asyncio.timeout(COMPLETE_WITHIN):
            values = await agent.complete_prompt_argument(
                spec.name, target.argument, target.value, target.known or None
            )
    except TimeoutError:
        logger.info("completing %s of the prompt %s took too long", target.argument, spec.name)
        return []
    written = [target.written(value) for value in values]
    return [app_commands.Choice(name=text, value=text) for text in written if len(text) <= CHOICE_CHARS][
        :CHOICES
    ]

"""The slash commands (/connections and /connect are registered with the sign-ins).

Names, descriptions and options come from the command table (`adapters.common.commands`). Each
command acknowledges within Discord's 3 seconds before anything slow. `/prompt name: arguments:`
starts a server's prompt whose text is then an ordinary `/ask` question.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import discord
from discord import app_commands

from adapters.common.commands import DISCORD, Command, command_on, offered_on
from adapters.discord.approvals import person
from adapters.discord.delivery import NO_MENTIONS, landed, tell
from adapters.discord.incoming import PLATFORM, interaction_key, place_of
from adapters.discord.render import safe_chunks, safe_text
from adapters.discord.settings import DiscordSettings
from adapters.prompt_arguments import arguments_usage, completion_at_end, parse_arguments
from bot.agent import Agent
from bot.errors import PromptError
from bot.text import show_link_targets, split_markdown, truncate
from bot.types import Incoming, PromptSpec, RememberedApproval

logger = logging.getLogger(__name__)

# How a thread of mine goes on, by NERVE_DISCORD_MESSAGE_CONTENT: without the Message Content intent
# Discord blanks every guild message that does not mention the bot, so only mentions reach it.
IN_MY_THREADS_READING = "in my threads just write (no mention needed) to continue."
IN_MY_THREADS_MENTIONS = "in my threads mention me to continue (I only see messages that mention me)."
RESET_NOWHERE = "There is no conversation to reset here: use /reset inside one of my threads or in a DM."
RESET_DONE = "Started a new conversation here: I no longer use what was said before."
NO_TOOLS = "No tools are available here right now."
ADMINS_ONLY = "Only nerve's admins (NERVE_ADMINS) can see and revoke remembered approvals."
NO_APPROVALS = "Approvals are not enabled."
NOTHING_REMEMBERED = "Nothing is always allowed anywhere: every call that needs approval asks."
REVOKE_FORMAT = (
    "Write what to revoke as `PLACE SERVER/TOOL`, as /approvals lists it, "
    "e.g. `discord:123 notes/append_note`."
)


def usage(command: Command) -> str:
    """A command as Discord writes it: `prompt name: [arguments:]`."""
    options = (f"[{o.name}:]" if o.optional else f"{o.name}:" for o in command.options)
    return " ".join([command.name, *options])


def slash(
    tree: app_commands.CommandTree[Any], name: str
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], app_commands.Command[Any, ..., None]]:
    """Register a handler as the table's command `name`, described as the table says, in guilds and DMs."""
    command = command_on(DISCORD, name)
    if command is None:
        raise LookupError(f"/{name} is not a Discord command in the table of adapters/common/commands.py")
    described = app_commands.describe(**{option.name: option.about for option in command.options})
    contexts = app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    summary = command.summary[:1].upper() + command.summary[1:]
    return lambda handler: tree.command(name=name, description=summary)(described(contexts(handler)))


def help_text(settings: DiscordSettings) -> str:
    """`/help` for the settings in force: whether people must mention nerve in its threads."""
    reading = settings.nerve_discord_message_content
    in_threads = IN_MY_THREADS_READING if reading else IN_MY_THREADS_MENTIONS
    return "\n".join(
        [
            "**nerve** answers questions with the help of tools.",
            *(f"• `/{usage(c)}` — {c.summary}" for c in offered_on(DISCORD)),
            f"• Mention me in a channel to ask there too; {in_threads}",
            "• DM me for a private conversation that no one else sees.",
            "Under each answer, **Tool results** shows what the tools returned (only to you).",
            "Tool calls that change something wait for **Approve** from the person who asked (or an admin).",
        ]
    )


def asked_here(interaction: discord.Interaction[Any]) -> Incoming:
    """An `Incoming` that stands for "this place, this user", for what depends on the place."""
    key = interaction_key(interaction, interaction.channel_id or 0)
    assert key is not None  # a plain channel is named by a thread on itself
    user_id = str(interaction.user.id)
    return Incoming(key=key, text="", user_id=user_id, place=place_of(key, user_id))


def tools_text(agent: Agent, here: Incoming | None = None) -> list[str]:
    """The tools offered `here`, a line each: the servers' words, shown as an answer is (links in view)."""
    lines = []
    for tool in agent.tools(here):
        description = truncate((tool.description.strip().splitlines() or [""])[0], 150, at_word=True)[0]
        lines.append(f"• **{tool.name}** — {description}" if description else f"• **{tool.name}**")
    return safe_chunks("\n".join(lines), 2000) if lines else [NO_TOOLS]


def place_name(place: str) -> str:
    """A remembered approval's place as people read it: the channel (or "a DM channel") and its id."""
    platform, _, channel = place.partition(":")
    return f"<#{channel}> (`{place}`)" if platform == PLATFORM and channel.isdigit() else f"`{place}`"


def approvals_text(remembered: list[RememberedApproval]) -> list[str]:
    if not remembered:
        return [NOTHING_REMEMBERED]
    lines = ["**Always allowed** (revoke one with `/approvals revoke:PLACE SERVER/TOOL`):"]
    lines += [
        f"• `{item.place} {item.server}/{item.tool}` — in {place_name(item.place)}, "
        f"allowed by {person(item.granted_by)} on {item.granted_at[:16].replace('T', ' ')} UTC"
        for item in remembered
    ]
    return split_markdown("\n".join(lines), 2000)


def parse_revoke(text: str) -> tuple[str, str, str] | None:
    place, _, target = text.strip().partition(" ")
    server, divided, tool = target.strip().partition("/")
    return (place, server, tool) if place and divided and server and tool else None


def register(
    tree: app_commands.CommandTree[Any],
    agent: Agent,
    settings: DiscordSettings,
    ask_with: Callable[[discord.Interaction[Any], str | None, Sequence[discord.Attachment]], Awaitable[None]],
) -> None:
    """Add the commands to the bot's tree; `ask_with` (the bot's `handle_ask`) runs a question's turn
    (a started prompt's text, or the `question` option read from the interaction, and its files)."""

    @slash(tree, "ask")
    async def ask(
        interaction: discord.Interaction[Any], question: str, file: discord.Attachment | None = None
    ) -> None:
        await ask_with(interaction, None, (file,) if file is not None else ())

    @slash(tree, "prompt")
    async def prompt(interaction: discord.Interaction[Any], name: str, arguments: str | None = None) -> None:
        question = await question_of(agent, interaction, asked_here(interaction), name, arguments or "")
        if question is not None:
            await ask_with(interaction, question, ())

    @prompt.autocomplete("name")
    async def prompt_names(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        typed = current.strip().lower()
        found = []
        for spec in agent.prompts(asked_here(interaction)):
            if len(spec.name) > CHOICE_CHARS or (
                typed not in spec.name.lower() and typed not in spec.title.lower()
            ):
                continue
            # Plain text on Discord, but the server's words all the same: a link shows its target.
            summary = show_link_targets((spec.description.strip().splitlines() or [""])[0])
            label = f"{spec.name} — {summary}" if summary else spec.name
            found.append(app_commands.Choice(name=truncate(label, CHOICE_CHARS)[0], value=spec.name))
        return found[:CHOICES]

    @prompt.autocomplete("arguments")
    async def prompt_arguments(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        """The arguments text completed where the server completes the value being typed at its end."""
        name = str(getattr(interaction.namespace, "name", None) or "")
        spec = offered(agent, asked_here(interaction), name)
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
        return choices([target.written(value) for value in values])

    @slash(tree, "tools")
    async def tools(interaction: discord.Interaction[Any]) -> None:
        for chunk in tools_text(agent, asked_here(interaction)):
            await tell(interaction, chunk)

    @slash(tree, "reset")
    async def reset(interaction: discord.Interaction[Any]) -> None:
        key = interaction_key(interaction, None)  # this DM or thread; none in a plain channel
        if key is None:
            await tell(interaction, RESET_NOWHERE)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        await agent.reset(key)
        await tell(interaction, RESET_DONE)

    @slash(tree, "approvals")
    async def approvals(interaction: discord.Interaction[Any], revoke: str | None = None) -> None:
        """List remembered approvals, or revoke one; admins only, answered only to them."""
        if str(interaction.user.id) not in settings.admins:
            await tell(interaction, ADMINS_ONLY)
            return
        if not agent.approvals_on:
            await tell(interaction, NO_APPROVALS)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        if revoke is None or not revoke.strip():
            texts = approvals_text(await agent.remembered_approvals())
        elif (parts := parse_revoke(revoke)) is None:
            texts = [REVOKE_FORMAT]
        elif await agent.revoke_approval(*parts):
            place, server, tool = parts
            texts = [f"Revoked: `{server}/{tool}` in {place_name(place)} asks for approval again."]
        else:
            texts = [f"Nothing matches `{truncate(revoke.strip(), 200)[0]}`. " + REVOKE_FORMAT]
        for text in texts:
            await tell(interaction, text)

    @approvals.autocomplete("revoke")
    async def revoke_choices(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        if not agent.approvals_on or str(interaction.user.id) not in settings.admins:
            return []
        found = [f"{r.place} {r.server}/{r.tool}" for r in await agent.remembered_approvals()]
        return choices(found, current)

    @slash(tree, "help")
    async def help_command(interaction: discord.Interaction[Any]) -> None:
        await tell(interaction, help_text(settings))

    @tree.error
    async def on_error(interaction: discord.Interaction[Any], error: app_commands.AppCommandError) -> None:
        if isinstance(error, app_commands.CommandSignatureMismatch | app_commands.CommandNotFound):
            # Discord's idea of the commands is older or newer than this process's: no bug to trace.
            logger.warning("ignored a slash command Discord sent in another shape: %s", error)
        else:
            logger.exception("slash command failed", exc_info=error)
        text = "Sorry — something went wrong on my side with that command. Please try again."
        await landed(tell(interaction, text), "could not tell the user about the failed command either")


# How long the command waits for the server's text before it defers (Discord allows 3 s).
ANSWER_WITHIN = 2.0
# How long an autocomplete waits for the server's completion (Discord allows 3 s).
COMPLETE_WITHIN = 2.0
CHOICES = 25  # Discord's limit per autocomplete answer
CHOICE_CHARS = 100  # Discord's limit on a choice's name and value


def choices(texts: list[str], typed: str = "") -> list[app_commands.Choice[str]]:
    """An autocomplete's answer: the texts holding what was typed, as many as fit Discord's limits."""
    fitting = [text for text in texts if typed.lower() in text.lower() and len(text) <= CHOICE_CHARS]
    return [app_commands.Choice(name=text, value=text) for text in fitting[:CHOICES]]


def offered(agent: Agent, here: Incoming, name: str) -> PromptSpec | None:
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
    question: asyncio.Future[str] | None = None
    try:
        # An unknown name is left to the core, which names the prompts there are.
        arguments = parse_arguments(spec, written) if spec is not None else {}
        question = asyncio.ensure_future(agent.prompt_question(here, name, arguments))
        done, _ = await asyncio.wait({question}, timeout=ANSWER_WITHIN)
        if not done:
            await interaction.response.defer(thinking=True)
        return await question
    except PromptError as exc:
        await refuse(interaction, str(exc) + hint)
        return None
    finally:
        if question is not None:
            question.cancel()


async def refuse(interaction: discord.Interaction[Any], text: str) -> None:
    """Say why the prompt did not start, to the person only or in the "thinking…" message (links in view)."""
    text = safe_text(truncate(text, 1900)[0])
    if interaction.response.is_done():
        await interaction.edit_original_response(content=text, allowed_mentions=NO_MENTIONS)
    else:
        await tell(interaction, text)

"""Every surface offers exactly the commands the command table gives it: Slack's `/nerve` help, its
handlers and both app manifests' usage hint; Discord's registered slash commands (names,
descriptions, options) and its `/help`; the terminal chat's `/help`, its handlers and Tab completion.
A command added to the table and not to a surface (or the other way round) fails here."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from discord import app_commands
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from adapters.common.commands import COMMANDS, DISCORD, SLACK, TERMINAL, Command, Surface, offered_on
from adapters.discord.app import new_bot
from adapters.discord.commands import help_text as discord_help
from adapters.slack.commands import HELP as SLACK_HELP
from adapters.terminal.chat import COMMANDS as COMPLETED
from adapters.terminal.chat import TerminalChat
from adapters.terminal.chat import help_text as terminal_help
from adapters.terminal.line_editor import SlashCompleter
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord, settings_for
from tests.test_slack_harness import rig

MANIFESTS = [ROOT / "slack" / "manifest.socket.yaml", ROOT / "slack" / "manifest.http.yaml"]


def names(surface: Surface) -> list[str]:
    return [command.name for command in offered_on(surface)]


def same(found: list[str], surface: Surface, where: str) -> None:
    """`found` names each of the table's commands for `surface` once; else what is missing or extra."""
    assert len(set(found)) == len(found), f"{where}: a command twice in {found}"
    table = names(surface)
    missing, extra = [n for n in table if n not in found], [n for n in found if n not in table]
    assert not missing and not extra, f"{where}: missing {missing}, not in the table {extra}"


def test_each_surface_offers_each_name_once_and_discord_can_show_every_description() -> None:
    for surface in (SLACK, DISCORD, TERMINAL):
        assert len(set(names(surface))) == len(names(surface)), surface
    assert all(command.on for command in COMMANDS)
    assert all(len(command.summary) <= 100 for command in offered_on(DISCORD))  # Discord's limit


def test_slack_help_lists_the_table_and_each_sub_command_has_a_handler_and_a_hint() -> None:
    listed = re.findall(r"^• `/nerve ([a-z]+)", SLACK_HELP, flags=re.MULTILINE)
    same(listed, SLACK, "/nerve help")
    assert listed == names(SLACK), "the help lists the commands in the table's order"
    for command in offered_on(SLACK):
        assert f"`/nerve {command.written()}` — {command.summary}" in SLACK_HELP


def hint(command: Command) -> str:
    """How the usage hint names a sub-command: its name and what it must take."""
    return " ".join([command.name, *(o.shown() for o in command.options if not o.optional)])


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.name)
def test_the_slack_usage_hint_names_the_tables_sub_commands(path: Path) -> None:
    [command] = yaml.safe_load(path.read_text(encoding="utf-8"))["features"]["slash_commands"]
    shown = [part.strip() for part in command["usage_hint"].strip("[]").split("|")]
    assert shown == [hint(c) for c in offered_on(SLACK)]


async def test_slack_runs_a_handler_for_each_sub_command_of_the_table(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        same(list(r.bot.commands.handlers()), SLACK, "the /nerve handlers")


async def test_discord_registers_the_tables_commands_with_their_descriptions_and_options() -> None:
    async with FakeDiscord() as fake:
        settings = settings_for(fake, nerve_discord_message_content=True)
        bot = new_bot(SimpleNamespace(), settings)
        try:
            registered = {command.name: command for command in bot.tree.get_commands()}
        finally:
            await bot.close()
    same(list(registered), DISCORD, "Discord's registered commands")
    for command in offered_on(DISCORD):
        slash = registered[command.name]
        assert isinstance(slash, app_commands.Command)
        assert slash.description.lower() == command.summary.lower()
        options = [(o.name, not o.optional, o.about) for o in command.options]
        assert [(p.name, p.required, p.description) for p in slash.parameters] == options
    listed = re.findall(r"^• `/([a-z-]+)", discord_help(settings), flags=re.MULTILINE)
    same(listed, DISCORD, "Discord's /help")


def test_the_terminal_lists_runs_and_completes_the_tables_commands() -> None:
    listed = re.findall(r"^  /([a-z-]+)", terminal_help(), flags=re.MULTILINE)
    same(listed, TERMINAL, "the chat's /help")
    runtime = SimpleNamespace(
        agent=SimpleNamespace(connections=None),
        settings=SimpleNamespace(nerve_sign_in_timeout=60.0, nerve_schedule_grace=3600.0),
        wait_for_servers=lambda: None,
    )
    chat = TerminalChat(runtime, "t", console=Console(file=io.StringIO()))  # type: ignore[arg-type]
    same(list(chat.command_handlers()), TERMINAL, "the chat's handlers")

    completer = SlashCompleter(COMPLETED, lambda: [])
    for command in offered_on(TERMINAL):
        for word in (command.name, *command.aliases):
            offered = [c.text for c in completer.get_completions(Document(f"/{word[:-1]}"), CompleteEvent())]
            assert f"/{word}" in offered, word

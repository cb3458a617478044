"""The interactive chat: a REPL over one conversation, with its greeting and slash commands; its
turns are run by `adapters.terminal.turns`."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable

from rich.console import Console

from adapters.common.commands import TERMINAL, command_on, offered_on
from adapters.common.schedules import time_zone_command
from adapters.common.usage_words import usage_lines
from adapters.prompt_arguments import parse_arguments, usage
from adapters.terminal.attach import attach_command, offer
from adapters.terminal.files import Attachments, described, pasted_path
from adapters.terminal.keyboard import (
    Interrupted,
    LineReader,
    ReadLine,
    interruptible,
    tolerate_undecodable_input,
)
from adapters.terminal.line_editor import SlashCompleter, TerminalPrompt, history_file
from adapters.terminal.memory import memory_command
from adapters.terminal.rights import export_me, forget_me
from adapters.terminal.safe import shown
from adapters.terminal.schedules import TerminalSchedules, schedules_command
from adapters.terminal.sign_in import LoopbackCallback, TerminalSignIn
from adapters.terminal.turns import ChatTurns
from adapters.terminal.views import conversation_key, print_attachment, terminal_incoming
from bot.errors import PromptError
from bot.runtime import Runtime
from bot.text import show_link_targets
from bot.types import PromptSpec

logger = logging.getLogger(__name__)

KEYS = """\
Enter sends; Esc then Enter (or Alt-Enter) starts a new line; a paste is one question.
Up and Down recall earlier questions, Ctrl-R searches them, Tab completes commands and paths, Ctrl-L clears.
A line that is only the path of a file offers to attach it to your next question."""
# What Tab completes at the chat's prompt: every command of the table, by its name or an alias.
COMMANDS = tuple(f"/{word}" for command in offered_on(TERMINAL) for word in (command.name, *command.aliases))
# A chat command's handler: it gets the word typed and what follows; False means leave the chat.
SlashCommand = Callable[[str, str], Awaitable[bool | None]]


def help_text() -> str:
    """`/help`: the table's commands as the chat writes them, each with its summary, then the keys."""
    rows = (f"  {'/' + command.written():<17} {command.summary}" for command in offered_on(TERMINAL))
    return "\n".join(["Type a question and press Enter. Commands:", *rows, KEYS])


# Commands that read what the MCP servers offer: typed while they start, they wait for them.
SERVERS_NEEDED = frozenset({"/tools", "/prompt"})


class TerminalChat:
    """A REPL over one conversation; `notices` gives a line to show between turns, never mid-answer."""

    def __init__(
        self,
        runtime: Runtime,
        thread: str,
        console: Console | None = None,
        notices: Callable[[], str | None] = lambda: None,
        sign_in: LoopbackCallback | None = None,
    ) -> None:
        self._runtime = runtime
        self._key = conversation_key(thread)
        self._console = console or Console(highlight=False)
        self._notices = notices
        # The OS user: the one who asks in this terminal, and so the one who approves.
        self._user = self._key.workspace
        settings = runtime.settings
        self._interactive = self._console.is_terminal and sys.stdin.isatty()
        # Whether the banner (or a line since) said what the MCP servers came to.
        self._servers_told = False
        # The files `/attach` (or a path pasted alone) attached: they go with the next question.
        self._attachments = Attachments()
        # On a terminal, prompt_toolkit edits the line: the chat's own prompt keeps a history file
        # and completes commands; a tool's questions and approvals get line editing alone. Off one
        # (a pipe, a file), plain lines, as scripts expect.
        read: ReadLine = TerminalPrompt() if self._interactive else LineReader()
        self._read = read
        self._ask_question = read
        if self._interactive:
            self._ask_question = TerminalPrompt(
                history=history_file(settings.nerve_db),
                completer=SlashCompleter(COMMANDS, self._prompt_names),
                max_chars=settings.nerve_max_question_chars,
            )
        # Per-person servers: the links a turn asks for, opened here; the browser comes back to `sign_in`.
        self._sign_in = TerminalSignIn(
            runtime.agent, sign_in, self._console, self._key, self._user, wait=settings.nerve_sign_in_timeout
        )
        self._turns = ChatTurns(runtime, self._console, self._key, read, self._sign_in, self._servers_news)
        # The person's schedules, run while the chat is open; their answers come between prompts.
        self._schedules = TerminalSchedules(
            runtime.agent,
            self._key,
            self._console,
            grace=settings.nerve_schedule_grace,
            ready=runtime.wait_for_servers,
        )

    async def run(self) -> None:
        """Chat until /quit, end of input, or Ctrl-C at the prompt. On a terminal the prompt comes
        while the MCP servers start (a question waits for them); off one, once they have."""
        tolerate_undecodable_input()
        if not self._interactive:
            await self._runtime.wait_for_servers()
        self._banner()
        await self._show_recent()
        await self._turns.waiting_at_start()
        async with self._schedules.running():
            await self._chat()

    async def _chat(self) -> None:
        while True:
            self._servers_news()
            if (notice := self._notices()) is not None:
                self._console.print(f"[dim]{shown(notice)}[/dim]")
            await self._schedules.flush()
            for parked in self._schedules.take_parked():
                await self._turns.answered(parked)
            line = await self._read_question()
            if line is None:  # Ctrl-D, or Ctrl-C at the prompt: keep the shell's prompt on a new line
                self._console.print()
                return
            text = line.strip()
            if not text:
                continue
            if (path := await self._pasted_path(text)) is not None:
                attached = await offer(self._attachments, path, self._read, self._console)
                if attached is not False:  # attached, or cancelled: the line is not a question
                    continue
            elif text.startswith("/"):
                if text.split()[0] in SERVERS_NEEDED:  # wait for the servers' first attempts
                    if not self._runtime.servers_started:
                        self._console.print("[dim]Waiting for the MCP servers to start…[/dim]")
                        await self._runtime.wait_for_servers()
                    self._servers_news()
                if not await self._command(text):
                    return
                continue
            await self._ask(text)

    async def _ask(self, text: str) -> None:
        """A question, with the files attached since the last one."""
        files = self._attachments.take()
        if files:
            with_files = ", ".join(described(file) for file in files)
            self._console.print(f"[dim]With {shown(with_files)}.[/dim]")
        await self._turns.take(terminal_incoming(self._key, text, files))

    async def _pasted_path(self, text: str) -> str | None:
        """On a terminal, the path a line is when it is only that of a file (not a command); off one,
        where nobody could answer an offer, a line is a question as typed."""
        if not self._interactive or (text.startswith("/") and command_on(TERMINAL, text.split()[0][1:])):
            return None
        return await asyncio.to_thread(pasted_path, text)

    async def _read_question(self) -> str | None:
        """The chat's own prompt, above which a scheduled run's answer may be printed meanwhile."""
        self._schedules.at_prompt = True
        try:
            await self._schedules.flush()  # what arrived since the check before
            return await self._ask_question("you › ")
        finally:
            self._schedules.at_prompt = False

    def _banner(self) -> None:
        runtime, console = self._runtime, self._console
        starting = "the MCP servers are starting"
        tools = _count(len(runtime.agent.tools()), "tool") if runtime.servers_started else starting
        thread = shown(self._key.thread)
        console.print(f"[bold]nerve[/bold] — thread [cyan]{thread}[/cyan], {tools}. /help for commands.")
        if runtime.offline:
            console.print(
                "[yellow]Using the built-in offline model[/yellow] "
                "(no OPENAI_API_KEY or OPENAI_BASE_URL set): "
                "it follows simple rules to pick tools, so you can try nerve without a model service."
            )
        else:
            console.print(f"[dim]Model: {shown(runtime.model_name)}[/dim]")
        if runtime.servers_started:
            self._print_problems()

    def _servers_news(self) -> None:
        """Once the MCP servers started in the background: their tools, and which are not available."""
        if self._servers_told or not self._runtime.servers_started:
            return
        tools = _count(len(self._runtime.agent.tools()), "tool")
        self._console.print(f"[dim]The MCP servers have started: {tools}.[/dim]")
        self._print_problems()

    def _print_problems(self) -> None:
        self._servers_told = True
        for name, reason in self._runtime.host.problems():
            self._console.print(
                f"[red]MCP server {shown(name)} is not available:[/red] {shown(reason)} [dim](retrying)[/dim]"
            )

    async def _show_recent(self) -> None:
        history = await self._runtime.store.history(self._key)
        talk = ("user", "assistant")
        said = [m for m in history if m.role in talk and (m.content or "").strip() and not m.tool_calls]
        if not said:
            return
        so_far = _count(len(said), "message")
        self._console.print(f"[dim]Continuing this thread ({so_far} so far). Most recent:[/dim]")
        for message in said[-4:]:
            who = "you" if message.role == "user" else "nerve"
            first = (message.content or "").strip().splitlines()[0]  # non-empty: filtered above
            self._console.print(f"[dim]  {who}: {shown(first[:100])}[/dim]")

    async def _command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        word, _, argument = text.partition(" ")
        found = command_on(TERMINAL, word[1:])
        if found is None:
            self._console.print(f"Unknown command {shown(word)}. /help lists the commands.")
            return True
        return await self.command_handlers()[found.name](word, argument) is not False

    def command_handlers(self) -> dict[str, SlashCommand]:
        """What each chat command of the command table runs (a test holds the two together)."""
        return {
            "show": self._show,
            "attach": self._attach_command,
            "tools": self._tools_command,
            "prompt": lambda word, argument: self._prompt(argument.strip()),
            "connections": self._sign_in_command,
            "connect": self._sign_in_command,
            "disconnect": self._sign_in_command,
            "memory": self._memory_command,
            "forget-me": lambda word, argument: forget_me(
                self._runtime.agent, self._key, self._user, self._console, self._read
            ),
            "export": lambda word, argument: export_me(
                self._runtime.agent, self._key, self._user, argument, self._console
            ),
            "schedules": self._schedules_command,
            "usage": self._usage_command,
            "timezone": self._time_zone_command,
            "reset": self._reset_command,
            "help": self._help_command,
            "quit": self._quit_command,
        }

    async def _attach_command(self, word: str, argument: str) -> None:
        await attach_command(self._attachments, argument, self._console)

    async def _tools_command(self, word: str, argument: str) -> None:
        for tool in self._runtime.agent.tools():
            about = shown(show_link_targets(tool.description))
            self._console.print(f"[bold]{shown(tool.name)}[/bold] [dim]({shown(tool.server)})[/dim] {about}")

    async def _sign_in_command(self, word: str, argument: str) -> None:
        await self._turns.signed_in(await self._sign_in.command(word, argument))

    async def _memory_command(self, word: str, argument: str) -> None:
        here = terminal_incoming(self._key, "")
        await memory_command(self._runtime.agent, here, argument, self._console, self._read)

    async def _schedules_command(self, word: str, argument: str) -> None:
        person = self._runtime.agent.person(self._key, self._user)
        await schedules_command(self._runtime.agent, person, argument, self._console, time.time())

    async def _usage_command(self, word: str, argument: str) -> None:
        report = await self._runtime.agent.usage(terminal_incoming(self._key, ""))
        self._console.print("\n".join(usage_lines(report)), markup=False)

    async def _time_zone_command(self, word: str, argument: str) -> None:
        person = self._runtime.agent.person(self._key, self._user)
        said = await time_zone_command(self._runtime.agent, person, argument, word, now=time.time())
        self._console.print(said, markup=False)

    async def _reset_command(self, word: str, argument: str) -> None:
        await self._runtime.agent.reset(self._key)
        self._console.print("[dim]Started a new conversation in this thread.[/dim]")

    async def _help_command(self, word: str, argument: str) -> None:
        self._console.print(help_text(), markup=False)

    async def _quit_command(self, word: str, argument: str) -> bool:
        return False

    async def _show(self, word: str, argument: str) -> None:
        which = argument.strip()
        attachments = self._turns.last.attachments if self._turns.last else ()
        if not attachments:
            self._console.print("No tool results to show yet.")
            return
        if which in ("", "all"):
            chosen = list(enumerate(attachments, 1))
        elif which.isdigit() and 1 <= int(which) <= len(attachments):
            chosen = [(int(which), attachments[int(which) - 1])]
        else:
            self._console.print(f"Give a number from 1 to {len(attachments)}, or 'all'.")
            return
        for index, attachment in chosen:
            print_attachment(self._console, index, attachment)

    def _prompt_names(self) -> list[str]:
        return [spec.name for spec in self._runtime.agent.prompts(terminal_incoming(self._key, ""))]

    async def _prompt(self, written: str) -> None:
        """`/prompt`: the prompts offered here; `/prompt NAME [arg=value ...]` starts one as a turn."""
        agent = self._runtime.agent
        here = terminal_incoming(self._key, "")
        name, _, rest = written.partition(" ")
        if not name:
            self._list_prompts(agent.prompts(here), offered_elsewhere=bool(agent.prompts()))
            return
        spec = next((p for p in agent.prompts(here) if p.name == name), None)
        try:
            # An unknown name is left to the core, which names the prompts there are.
            arguments = parse_arguments(spec, rest) if spec is not None else {}
            question = await interruptible(agent.prompt_question(here, name, arguments))
        except PromptError as exc:
            hint = f" Write it as /prompt {usage(spec)}" if spec is not None else ""
            self._console.print(f"[yellow]{shown(str(exc))}[/yellow]{shown(hint)}")
            return
        except Interrupted:
            self._console.print("[dim]Cancelled: the prompt was not started.[/dim]")
            return
        except Exception as exc:  # a server that broke down mid-way: say so, keep the chat
            logger.exception("starting the prompt %s failed", name)
            self._console.print(f"[red]Sorry — the prompt could not be started: {shown(str(exc))}[/red]")
            return
        first = question.strip().splitlines()[0] if question.strip() else ""
        more = " …" if len(first) > 200 or question.strip() != first else ""
        self._console.print(f"[dim]prompt {shown(name)}: {shown(first[:200])}{more}[/dim]")
        await self._turns.take(terminal_incoming(self._key, question))

    def _list_prompts(self, prompts: list[PromptSpec], *, offered_elsewhere: bool) -> None:
        if not prompts:
            why = "none of the servers offers any, or they are starting"
            if offered_elsewhere:
                why = "the policy in the servers file offers none in the terminal"
            self._console.print(f"No prompts to start: {why}.")
            return
        self._console.print(
            "[dim]Start one with /prompt NAME arg=value …, quoting values with spaces "
            '(topic="the weather"); a value without a name fills the first required argument.[/dim]'
        )
        for spec in prompts:
            summary = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
            said = f" — {shown(show_link_targets(summary))}" if summary else ""
            self._console.print(f"[bold]{shown(usage(spec))}[/bold]{said} [dim]({shown(spec.server)})[/dim]")
            for argument in spec.arguments:
                optional = "" if argument.required else " (optional)"
                about = f": {argument.description.strip()}" if argument.description.strip() else ""
                line = shown(argument.name + optional + show_link_targets(about))
                self._console.print(f"  [dim]{line}[/dim]")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

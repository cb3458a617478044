"""The interactive chat: a REPL over one conversation, with Ctrl-C and slash commands.

One-shot `ask`, the tool list and history printing live in `adapters.terminal.views`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from adapters.common.commands import TERMINAL, command_on, offered_on
from adapters.prompt_arguments import parse_arguments, usage
from adapters.terminal.approve import (
    Parked,
    ReadLine,
    ask_each,
    go_on,
    go_on_answered,
    print_waiting,
    terminal_place,
    waiting_approval,
)
from adapters.terminal.fill_in import FillIn
from adapters.terminal.line_editor import SlashCompleter, TerminalPrompt, history_file
from adapters.terminal.live import LiveAnswer, PlainAnswer
from adapters.terminal.sign_in import LoopbackCallback, TerminalSignIn
from adapters.terminal.views import (
    attachment_line,
    conversation_key,
    format_history,
    print_attachment,
    print_reply,
    print_results,
    reply_as_json,
    shown,
)
from bot.errors import PromptError
from bot.runtime import Runtime
from bot.text.render import show_link_targets
from bot.text.scrub import scrub
from bot.types import AgentReply, ApprovalPrompt, Ask, Incoming, Progress, PromptSpec, TurnEvent

# The printing helpers moved to `views`; importing them from here keeps working.
__all__ = ["TerminalChat", "attachment_line", "format_history", "read_line", "reply_as_json"]

logger = logging.getLogger(__name__)

KEYS = """\
Enter sends; Esc then Enter (or Alt-Enter) starts a new line; a paste is one question.
Up and Down recall earlier questions, Ctrl-R searches them, Tab completes commands, Ctrl-L clears."""
# What Tab completes at the chat's prompt: every command of the table, by its name or an alias.
COMMANDS = tuple(f"/{word}" for command in offered_on(TERMINAL) for word in (command.name, *command.aliases))
# A chat command's handler: it gets the word typed and what follows; False means leave the chat.
SlashCommand = Callable[[str, str], Awaitable[bool | None]]


def help_text() -> str:
    """`/help`: the table's commands as the chat writes them, each with its summary, then the keys."""
    rows = (f"  {'/' + command.written():<17} {command.summary}" for command in offered_on(TERMINAL))
    return "\n".join(["Type a question and press Enter. Commands:", *rows, KEYS])


def _no_notice() -> str | None:
    return None


def _ignore() -> None:
    """Ctrl-C between a tool's questions: each question takes it for itself while it is asked."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """What one piece of a turn came to: its reply, and, when it parked on its tools' questions,
    how they went (asked here already)."""

    reply: AgentReply
    parked: Parked | None = None


# Commands that read what the MCP servers offer: typed while they start, they wait for them.
SERVERS_NEEDED = frozenset({"/tools", "/prompt"})


class TerminalChat:
    """A REPL over one conversation; the agent and everything below it stay platform-neutral.

    `notices` is asked before each prompt for one line to show (where the log went, say); it lets
    the chat mention such things between turns without printing them mid-answer.
    """

    def __init__(
        self,
        runtime: Runtime,
        thread: str,
        console: Console | None = None,
        notices: Callable[[], str | None] = _no_notice,
        sign_in: LoopbackCallback | None = None,
    ) -> None:
        self._runtime = runtime
        self._key = conversation_key(thread)
        self._thread = self._key.thread
        self._console = console or Console(highlight=False)
        self._notices = notices
        self._last: AgentReply | None = None
        # The OS user: the one who asks in this terminal, and so the one who approves.
        self._user = self._key.workspace
        # On a terminal, prompt_toolkit edits the line: the chat's own prompt keeps a history file
        # and completes commands; a tool's questions and approvals get line editing alone. Off one
        # (a pipe, a file), plain lines, as scripts expect.
        self._read: ReadLine = LineReader()
        self._ask_question: ReadLine = self._read
        self._interactive = self._console.is_terminal and sys.stdin.isatty()
        # Whether the banner (or a line since) said what the MCP servers came to.
        self._servers_told = False
        if self._interactive:
            self._read = TerminalPrompt()
            self._ask_question = TerminalPrompt(
                history=history_file(runtime.settings.nerve_db),
                completer=SlashCompleter(COMMANDS, self._prompt_names),
                max_chars=runtime.settings.nerve_max_question_chars,
            )
        # Off a terminal (a pipe, a file) the answer is written as plain text as it comes.
        self._plain = PlainAnswer(self._console.file)
        # Per-person servers: the links a turn asks for, opened here; the browser comes back to `sign_in`.
        self._sign_in = TerminalSignIn(
            runtime.agent.connections,
            sign_in,
            self._console,
            self._key,
            self._user,
            wait=runtime.settings.nerve_sign_in_timeout,
            on_ctrl_c=_on_ctrl_c,
        )

    async def run(self) -> None:
        """Chat until /quit, end of input, or Ctrl-C at the prompt.

        On a terminal the banner and the prompt come at once, while the MCP servers start; what
        they came to is said before a later prompt, and a question waits for them. Off a terminal
        (a script) the chat starts once they have, as ever."""
        tolerate_undecodable_input()
        if not self._interactive:
            await self._runtime.wait_for_servers()
        self._banner()
        await self._show_recent()
        await self._waiting_at_start()
        while True:
            self._servers_news()
            if (notice := self._notices()) is not None:
                self._console.print(f"[dim]{shown(notice)}[/dim]")
            line = await self._ask_question("you › ")
            if line is None:  # Ctrl-D, or Ctrl-C at the prompt: keep the shell's prompt on a new line
                self._console.print()
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if text.split()[0] in SERVERS_NEEDED:
                    await self._servers_up()
                if not await self._command(text):
                    return
                continue
            await self._turn(text)

    def _banner(self) -> None:
        runtime = self._runtime
        tools = (
            _count(len(runtime.agent.tools()), "tool")
            if runtime.servers_started
            else "the MCP servers are starting"
        )
        self._console.print(
            f"[bold]nerve[/bold] — thread [cyan]{shown(self._thread)}[/cyan], {tools}. /help for commands."
        )
        if runtime.offline:
            self._console.print(
                "[yellow]Using the built-in offline model[/yellow] "
                "(no OPENAI_API_KEY or OPENAI_BASE_URL set): "
                "it follows simple rules to pick tools, so you can try nerve without a model service."
            )
        else:
            self._console.print(f"[dim]Model: {shown(runtime.model_name)}[/dim]")
        if runtime.servers_started:
            self._print_problems()

    async def _servers_up(self) -> None:
        """Before what reads the servers' tools or prompts: wait for their first attempts."""
        if not self._runtime.servers_started:
            self._console.print("[dim]Waiting for the MCP servers to start…[/dim]")
            await self._runtime.wait_for_servers()
        self._servers_news()

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
        said = [
            m
            for m in history
            if m.role in ("user", "assistant") and (m.content or "").strip() and not m.tool_calls
        ]
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
            "tools": self._tools_command,
            "prompt": lambda word, argument: self._prompt(argument.strip()),
            "connections": self._sign_in_command,
            "connect": self._sign_in_command,
            "disconnect": self._sign_in_command,
            "reset": self._reset_command,
            "help": self._help_command,
            "quit": self._quit_command,
        }

    async def _tools_command(self, word: str, argument: str) -> None:
        for tool in self._runtime.agent.tools():
            self._console.print(
                f"[bold]{shown(tool.name)}[/bold] [dim]({shown(tool.server)})[/dim] "
                + shown(show_link_targets(tool.description))
            )

    async def _sign_in_command(self, word: str, argument: str) -> None:
        signed_in = await self._sign_in.command(word, argument)
        if signed_in:
            await self._answer(await self._go_on_signed_in(signed_in))

    async def _reset_command(self, word: str, argument: str) -> None:
        await self._runtime.agent.reset(self._key)
        self._console.print("[dim]Started a new conversation in this thread.[/dim]")

    async def _help_command(self, word: str, argument: str) -> None:
        self._console.print(help_text(), markup=False)

    async def _quit_command(self, word: str, argument: str) -> bool:
        return False

    async def _show(self, word: str, argument: str) -> None:
        which = argument.strip()
        attachments = self._last.attachments if self._last else ()
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
        return [spec.name for spec in self._runtime.agent.prompts(self._incoming(""))]

    def _incoming(self, text: str) -> Incoming:
        return Incoming(key=self._key, text=text, user_id=self._user, place=terminal_place(self._user))

    async def _turn(self, text: str) -> None:
        for request_id in self._sign_in.meanwhile():  # signed in while the chat did not wait: go on first
            await self._answer(await self._go_on_signed_in([request_id]))
        incoming = self._incoming(text)
        self._last = None
        piece = await self._work(lambda progress: self._runtime.agent.reply(incoming, progress))
        await self._answer(piece)

    async def _prompt(self, written: str) -> None:
        """`/prompt`: the prompts offered here; `/prompt NAME [arg=value ...]` starts one as a turn."""
        agent = self._runtime.agent
        here = self._incoming("")
        name, _, rest = written.partition(" ")
        if not name:
            self._list_prompts(agent.prompts(here), offered_elsewhere=bool(agent.prompts()))
            return
        spec = next((p for p in agent.prompts(here) if p.name == name), None)
        try:
            # An unknown name is left to the core, which names the prompts there are.
            arguments = parse_arguments(spec, rest) if spec is not None else {}
            asking = asyncio.ensure_future(agent.prompt_question(here, name, arguments))
            with _on_ctrl_c(asking.cancel):
                question = await asking
        except PromptError as exc:
            hint = f" Write it as /prompt {usage(spec)}" if spec is not None else ""
            self._console.print(f"[yellow]{shown(str(exc))}[/yellow]{shown(hint)}")
            return
        except asyncio.CancelledError:
            if not asking.cancelled():
                raise
            self._console.print("[dim]Cancelled: the prompt was not started.[/dim]")
            return
        except Exception as exc:  # a server that broke down mid-way: say so, keep the chat
            logger.exception("starting the prompt %s failed", name)
            self._console.print(f"[red]Sorry — the prompt could not be started: {shown(str(exc))}[/red]")
            return
        first = question.strip().splitlines()[0] if question.strip() else ""
        more = " …" if len(first) > 200 or question.strip() != first else ""
        self._console.print(f"[dim]prompt {shown(name)}: {shown(first[:200])}{more}[/dim]")
        await self._turn(question)

    def _list_prompts(self, prompts: list[PromptSpec], *, offered_elsewhere: bool) -> None:
        if not prompts:
            why = (
                "the policy in the servers file offers none in the terminal"
                if offered_elsewhere
                else "none of the servers offers any, or they are starting"
            )
            self._console.print(f"No prompts to start: {why}.")
            return
        self._console.print(
            "[dim]Start one with /prompt NAME arg=value …, quoting values with spaces "
            '(topic="the weather"); a value without a name fills the first required argument.[/dim]'
        )
        for spec in prompts:
            summary = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
            self._console.print(
                f"[bold]{shown(usage(spec))}[/bold]"
                + (f" — {shown(show_link_targets(summary))}" if summary else "")
                + f" [dim]({shown(spec.server)})[/dim]"
            )
            for argument in spec.arguments:
                optional = "" if argument.required else " (optional)"
                about = f": {argument.description.strip()}" if argument.description.strip() else ""
                self._console.print(
                    f"  [dim]{shown(argument.name + optional + show_link_targets(about))}[/dim]"
                )

    async def _work(
        self, work: Callable[[Progress], Coroutine[Any, Any, AgentReply | None]], *, cancellable: bool = True
    ) -> _Piece | None:
        """Run one piece of a turn, shown live as it goes; None when it was cancelled or failed (said so).

        What a server asks meanwhile is asked here and now: its call waits for the answer. A turn
        that parked on its tools' questions instead returns with them open: they are asked before
        this returns, and the piece says whether the answers let it go on.
        """
        if not self._runtime.servers_started:
            self._console.print("[dim]Waiting for the MCP servers to start…[/dim]")

        async def after_the_servers(progress: Progress) -> AgentReply | None:
            # A question typed while they start is answered as if asked once they had.
            await self._runtime.wait_for_servers()
            self._servers_news()
            return await work(progress)

        async with (
            self._showing("  (Ctrl-C cancels)" if cancellable else "") as (sink, pause),
            FillIn(self._runtime.agent, self._user, self._read, self._console, pause) as fill_in,
        ):
            task = asyncio.create_task(after_the_servers(fill_in.watching(self._sign_in.watch(sink))))
            try:
                # Under the piece's own Ctrl-C, so a question asked while the piece ran (which takes
                # Ctrl-C for itself, in a task of its own) keeps it once the piece has returned.
                with _on_ctrl_c(_ignore):
                    with _on_ctrl_c(task.cancel if cancellable else self._finishing):
                        reply = await task
                    if reply is None:
                        return None
                    return _Piece(reply, await fill_in.settle())
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                message = "[dim]Cancelled. Your message is kept; ask again to retry.[/dim]"
            except Exception as exc:  # the one net per message: say something short and true
                logger.exception("terminal turn failed")
                message = f"[red]Sorry — that failed: {shown(str(exc))}[/red]"
        self._plain.interrupted()
        self._console.print(message)
        return None

    @contextlib.asynccontextmanager
    async def _showing(
        self, hint: str
    ) -> AsyncIterator[tuple[Progress, Callable[[], AbstractContextManager[None]]]]:
        """Where a turn's events go (the live view on a terminal, plain text elsewhere), and how to
        keep the view off the screen while a question is asked."""
        if not self._console.is_terminal:
            self._plain.after_prompt()
            yield self._plain.progress, contextlib.nullcontext
            return
        async with LiveAnswer(self._console, hint=hint) as live:
            yield live.progress, live.paused

    def _print(self, reply: AgentReply) -> None:
        """The final reply: drawn anew on a terminal (the live view is gone); elsewhere only the
        part of its text not written yet, then its tool results."""
        if self._console.is_terminal:
            print_reply(self._console, reply)
            return
        self._plain.finish(reply.text)
        print_results(self._console, reply)

    def _finishing(self) -> None:
        # Going on after a decision or an answer is not cancelled: the turn would stay claimed, and
        # the thread would wait behind it.
        self._console.print("[dim]Finishing what was decided; the answer follows.[/dim]")

    async def _answer(self, piece: _Piece | None) -> None:
        """Print a reply; while it waits for approval, ask, go on, and print what follows. A reply
        that waits for answers to its tools' questions is not the answer: they were asked already,
        so it goes on at once."""
        went_on = False
        while piece is not None:
            reply, parked = piece.reply, piece.parked
            approval = waiting_approval(reply)
            self._last = reply
            if parked is not None:
                self._plain.interrupted()
            elif self._sign_in.needed and approval is None:
                pass  # its note speaks of a Connect button; here the link itself follows
            elif reply.text or reply.attachments:
                self._print(reply)
            if approval is not None:
                piece = await self._decide(approval)
            elif parked is not None:
                piece = await self._go_on_answered(parked)
            elif self._sign_in.needed:
                piece = await self._go_on_signed_in(await self._sign_in.signed_in())
            else:
                break
            went_on = True
        if went_on:
            await self._answer_waiting_messages()

    async def _go_on_answered(self, parked: Parked) -> _Piece | None:
        agent = self._runtime.agent

        async def rest_of_turn(progress: Progress) -> AgentReply | None:
            final = await go_on_answered(agent, parked, progress)
            if final is None:
                tools = ", ".join(parked.tools) or "a tool"
                self._console.print(
                    f"[dim]This turn still waits for an answer to what {shown(tools)} asked, "
                    "or goes on elsewhere.[/dim]"
                )
            return final

        return await self._work(rest_of_turn, cancellable=False)

    async def _go_on_signed_in(self, request_ids: list[str]) -> _Piece | None:
        """The rest of the turns that waited for a sign-in here, once the browser came back."""
        piece = None
        for request_id in request_ids:

            async def rest_of_turn(progress: Progress, request_id: str = request_id) -> AgentReply | None:
                return await self._runtime.agent.resume(request_id, progress)

            piece = await self._work(rest_of_turn, cancellable=False)
        return piece

    async def _decide(self, prompt: ApprovalPrompt) -> _Piece | None:
        agent = self._runtime.agent
        if prompt.open:
            print_waiting(self._console, prompt)
            await ask_each(agent, prompt, self._user, self._read, self._console)

        async def rest_of_turn(progress: Progress) -> AgentReply | None:
            final = await go_on(agent, prompt, progress)
            if final is None:
                self._console.print("[dim]This turn still waits for a decision, or goes on elsewhere.[/dim]")
            return final

        return await self._work(rest_of_turn, cancellable=False)

    async def _answer_waiting_messages(self) -> None:
        """Messages that waited behind a parked turn of this thread (written elsewhere, or before a
        restart), answered in order now that it is done."""
        async for incoming, reply in self._runtime.agent.deferred_replies(self._key):
            self._console.print(f"[dim]Your message that waited:[/dim] {shown(incoming.text[:100])}")
            await self._answer(_Piece(reply))

    async def _waiting_at_start(self) -> None:
        """A turn of this thread that was waiting for a decision, or for an answer to what a tool
        asked, when nerve stopped: ask again."""
        approvals = self._runtime.agent.approvals
        if approvals is None or (request_id := await approvals.waiting_in(self._key)) is None:
            return
        found = await approvals.prompt(request_id)
        if found is None:
            return
        prompt, status = found
        if status != "waiting":
            self._console.print(
                "[yellow]Another nerve is finishing the last answer of this thread;[/yellow] "
                "new messages wait behind it."
            )
            return
        waits = await self._runtime.store.sign_in_waits(request_id) if prompt.questions_open else []
        if waits:
            servers = list(dict.fromkeys(w.server for w in waits))
            names = shown(", ".join(servers))
            waiting = f"Your last question in this thread waits for a sign-in to {names}."
            self._console.print(f"[yellow]{waiting}[/yellow]")
            await self._answer(await self._go_on_signed_in(await self._sign_in.connect(servers)))
            return
        if prompt.questions_open and await self._ask_again(prompt):
            return
        if not any(call.status == "pending" for call in prompt.calls) and prompt.questions_open:
            # Questions this terminal cannot answer (none of them is its user's): the turn goes on
            # once they have expired (the tool is told "cancel"), or /reset ends it.
            until = time.strftime("%H:%M", time.localtime(prompt.expires_at))
            self._console.print(
                "[yellow]Your last question in this thread waits for an answer to what a tool asked "
                f"before nerve stopped,[/yellow] until {until}: start the chat again after that for "
                "the answer without it, or /reset to start a new conversation."
            )
            await self._answer(await self._go_on_answered(Parked(key=self._key, tools=(), resume=None)))
            return
        self._console.print(
            "[yellow]Your last question in this thread is waiting for your decision.[/yellow]"
        )
        await self._answer(_Piece(AgentReply(text="", waiting=(Ask.of_approval(prompt),))))

    async def _ask_again(self, prompt: ApprovalPrompt) -> bool:
        """What a tool asked before nerve stopped, asked again as if just asked (the answer lets the
        turn go on and print its answer); calls of its round that wait for a decision are asked
        about next. False when none of its questions is this person's to answer now; expired ones
        are not asked: the turn goes on without them."""
        agent = self._runtime.agent
        questions = await agent.parked_questions(prompt.request_id)
        if any(q.expires_at <= time.time() for q in questions):
            self._console.print(
                "[dim]What a tool asked before nerve stopped was not answered in time; "
                "the turn goes on without it.[/dim]"
            )
            await self._answer(await self._go_on_answered(Parked(key=self._key, tools=(), resume=None)))
            return True
        mine = [q for q in questions if q.user_id == self._user]
        if not mine:
            return False
        self._console.print(
            "[yellow]Your last question in this thread waits for an answer to what a tool asked "
            "before nerve stopped:[/yellow]"
        )
        waits = (Ask.of_approval(prompt),) if any(call.status == "pending" for call in prompt.calls) else ()

        async def asked_again(progress: Progress) -> AgentReply:
            for question in mine:
                await progress(TurnEvent(kind="ask", message=question.message, ask=Ask.of_input(question)))
            return AgentReply(text="", waiting=waits)

        await self._answer(await self._work(asked_again, cancellable=False))
        return True


# The actions of the `_on_ctrl_c` blocks now open, innermost last: Ctrl-C runs the innermost.
_ctrl_c_actions: list[Callable[[], object]] = []


@contextlib.contextmanager
def _on_ctrl_c(action: Callable[[], object]) -> Iterator[None]:
    """Ctrl-C runs `action` while inside: cancel the running turn, or leave at the prompt.

    Blocks nest (a server's question is asked while its turn runs): the inner one takes Ctrl-C,
    and on leaving gives it back to the one around it.
    """
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, action)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (not the main thread)
        yield
        return
    _ctrl_c_actions.append(action)
    try:
        yield
    finally:
        del _ctrl_c_actions[max(i for i, a in enumerate(_ctrl_c_actions) if a is action)]
        if _ctrl_c_actions:
            loop.add_signal_handler(signal.SIGINT, _ctrl_c_actions[-1])
        else:
            loop.remove_signal_handler(signal.SIGINT)
            # remove_signal_handler installs Python's default handler; put back asyncio.run's own.
            signal.signal(signal.SIGINT, previous)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def tolerate_undecodable_input() -> None:
    """Let stdin hand over bytes that are not UTF-8 (as lone surrogates) instead of failing the read.

    `read_line` scrubs them to U+FFFD, so a stray Latin-1 byte costs a character, not the chat.
    """
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")


class LineReader:
    """Lines from stdin without blocking the loop; None at end of input or on Ctrl-C.

    Each line is read by a daemon thread, not the loop's executor: `asyncio.run` waits for executor
    threads at exit, so a thread stuck in `input()` would keep nerve from leaving after Ctrl-C.
    Ctrl-C answers None at once, but that thread stays blocked in `input()`, and a second `input()`
    would wait behind it; so the next read shows its own prompt and takes that thread's line.
    """

    def __init__(self) -> None:
        self._unclaimed: asyncio.Future[str | None] | None = None

    async def __call__(self, prompt: str) -> str | None:
        loop = asyncio.get_running_loop()
        interrupted: asyncio.Future[None] = loop.create_future()

        def interrupt() -> None:
            if not interrupted.done():
                interrupted.set_result(None)

        # Ctrl-C is caught before the prompt can appear: a person may press it as soon as they see it.
        with _on_ctrl_c(interrupt):
            line = self._unclaimed
            self._unclaimed = None
            if line is None:
                line = _read_in_thread(loop, prompt)
            elif not line.done():
                sys.stdout.write(prompt)
                sys.stdout.flush()
            try:
                await asyncio.wait((line, interrupted), return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the question went away: the next read takes the line
                self._unclaimed = line
                raise
        if line.done():
            return line.result()
        self._unclaimed = line
        return None


def _read_in_thread(loop: asyncio.AbstractEventLoop, prompt: str) -> asyncio.Future[str | None]:
    line: asyncio.Future[str | None] = loop.create_future()

    def deliver(value: str | None) -> None:
        if not line.done():
            line.set_result(value)

    def read() -> None:
        try:
            value: str | None = scrub(input(prompt))
        except (EOFError, KeyboardInterrupt, OSError, UnicodeDecodeError):
            value = None
        with contextlib.suppress(RuntimeError):  # the loop closed while we waited: nobody is listening
            loop.call_soon_threadsafe(deliver, value)

    threading.Thread(target=read, name="nerve-stdin", daemon=True).start()
    return line


async def read_line(prompt: str) -> str | None:
    """One line from stdin (see `LineReader`), for a program that reads only until a Ctrl-C."""
    return await LineReader()(prompt)

"""The terminal front end: an interactive chat, a one-shot `ask`, and views of tools and history."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.status import Status

from bot.render import pretty_json
from bot.runtime import Runtime
from bot.types import AgentReply, Attachment, ChatMessage, ConversationKey, Incoming, TurnEvent

logger = logging.getLogger(__name__)

HELP = """\
Type a question and press Enter. Commands:
  /show N    show tool result N of the last answer in full (/show all for every one)
  /tools     list the tools the model can use
  /reset     start a new conversation in this thread
  /help      this text
  /quit      leave (Ctrl-D works too)"""


def conversation_key(thread: str) -> ConversationKey:
    """Terminal threads belong to the local user, so two people on one machine keep theirs apart."""
    return ConversationKey(platform="terminal", workspace=getpass.getuser(), channel="cli", thread=thread)


def attachment_line(index: int, attachment: Attachment) -> str:
    mark = "[red]✗[/red]" if attachment.is_error else "[green]✓[/green]"
    return (
        f"  [dim]▸ \\[{index}][/dim] {mark} [bold]{escape(attachment.name)}[/bold] "
        f"[dim]{attachment.latency_ms:.0f} ms — {escape(attachment.summary)}[/dim]"
    )


def reply_as_json(reply: AgentReply) -> dict[str, Any]:
    """The shape `nerve ask --json` prints, stable for scripts."""
    return {
        "text": reply.text,
        "error": reply.failed,
        "tool_calls": [
            {"name": a.name, "arguments": a.arguments, "is_error": a.is_error, "content": a.content}
            for a in reply.attachments
        ],
    }


class TerminalChat:
    """A REPL over one conversation; the agent and everything below it stay platform-neutral."""

    def __init__(self, runtime: Runtime, thread: str, console: Console | None = None) -> None:
        self._runtime = runtime
        self._key = conversation_key(thread)
        self._thread = thread
        self._console = console or Console(highlight=False)
        self._last: AgentReply | None = None

    async def run(self) -> None:
        self._banner()
        await self._show_recent()
        while True:
            try:
                line = await read_line("you › ")
            except asyncio.CancelledError:
                self._console.print()  # Ctrl-C at the prompt: leave the shell's prompt on a line of its own
                raise
            if line is None:
                self._console.print()
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await self._command(text):
                    return
                continue
            await self._turn(text)

    def _banner(self) -> None:
        runtime = self._runtime
        tools = runtime.agent.tools()
        self._console.print(
            f"[bold]nerve[/bold] — thread [cyan]{escape(self._thread)}[/cyan], {_count(len(tools), 'tool')}. "
            "/help for commands."
        )
        if runtime.offline:
            self._console.print(
                "[yellow]Using the built-in offline model[/yellow] "
                "(no OPENAI_API_KEY or OPENAI_BASE_URL set): "
                "it follows simple rules to pick tools, so you can try nerve without a model service."
            )
        else:
            self._console.print(f"[dim]Model: {escape(runtime.model_name)}[/dim]")
        for name, reason in runtime.host.problems():
            self._console.print(
                f"[red]MCP server {escape(name)} is not available:[/red] {escape(reason)} "
                "[dim](retrying)[/dim]"
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
            self._console.print(f"[dim]  {who}: {escape(first[:100])}[/dim]")

    async def _command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        command, _, argument = text.partition(" ")
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self._console.print(HELP)
        elif command == "/tools":
            for tool in self._runtime.agent.tools():
                self._console.print(
                    f"[bold]{escape(tool.name)}[/bold] [dim]({escape(tool.server)})[/dim] "
                    + escape(tool.description)
                )
        elif command == "/reset":
            await self._runtime.agent.reset(self._key)
            self._console.print("[dim]Started a new conversation in this thread.[/dim]")
        elif command == "/show":
            self._show(argument.strip())
        else:
            self._console.print(f"Unknown command {command}. /help lists the commands.", markup=False)
        return True

    def _show(self, which: str) -> None:
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
            self._console.print(attachment_line(index, attachment))
            self._console.print(f"[dim]arguments:[/dim] {escape(attachment.arguments_json())}")
            self._console.print(pretty_json(attachment.content), markup=False, highlight=False)
            if attachment.truncated:
                self._console.print("[dim](cut here; the full result is stored in the conversation)[/dim]")

    async def _turn(self, text: str) -> None:
        incoming = Incoming(key=self._key, text=text, user_id=self._key.workspace)
        self._last = None
        with self._console.status("thinking…  [dim](Ctrl-C cancels)[/dim]") as status:
            turn = asyncio.create_task(self._runtime.agent.reply(incoming, _progress_to(status)))
            try:
                with _ctrl_c_cancels(turn):
                    reply = await turn
            except asyncio.CancelledError:
                if not turn.cancelled():
                    raise
                self._console.print("[dim]Cancelled. Your message is kept; ask again to retry.[/dim]")
                return
            except Exception as exc:  # the one net per message: say something short and true
                logger.exception("terminal turn failed")
                self._console.print(f"[red]Sorry — that failed: {escape(str(exc))}[/red]")
                return
        self._last = reply
        print_reply(self._console, reply)


@contextlib.contextmanager
def _ctrl_c_cancels(task: asyncio.Task[Any]) -> Iterator[None]:
    """While a turn runs, Ctrl-C cancels that turn only; at the prompt it still leaves the chat."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (not the main thread)
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


async def read_line(prompt: str) -> str | None:
    """One line from stdin without blocking the loop; None at end of input.

    A daemon thread, not the loop's executor: `asyncio.run` waits for executor threads at exit, so
    a thread stuck in `input()` would make Ctrl-C hang instead of closing the MCP servers.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def deliver(value: str | None) -> None:
        if not answer.done():
            answer.set_result(value)

    def read() -> None:
        try:
            value: str | None = input(prompt)
        except (EOFError, KeyboardInterrupt, OSError):
            value = None
        with contextlib.suppress(RuntimeError):  # the loop closed while we waited: nobody is listening
            loop.call_soon_threadsafe(deliver, value)

    threading.Thread(target=read, name="nerve-stdin", daemon=True).start()
    return await answer


def _progress_to(status: Status) -> Any:
    async def show(event: TurnEvent) -> None:
        status.update(event.message)

    return show


def print_reply(console: Console, reply: AgentReply) -> None:
    for index, attachment in enumerate(reply.attachments, 1):
        console.print(attachment_line(index, attachment))
    console.print(Markdown(reply.text))
    if reply.attachments:
        console.print("[dim]/show N expands a tool result.[/dim]")


async def ask(runtime: Runtime, thread: str, text: str, *, as_json: bool) -> int:
    """One turn, then exit: for scripts and quick questions."""
    if not text.strip():
        sys.stderr.write("nerve: nothing to ask: give the question as an argument\n")
        return 2
    incoming = Incoming(key=conversation_key(thread), text=text, user_id=getpass.getuser())
    reply = await runtime.agent.reply(incoming)
    if as_json:
        sys.stdout.write(json.dumps(reply_as_json(reply), ensure_ascii=False, indent=2) + "\n")
        return 1 if reply.failed else 0
    else:
        console = Console(highlight=False)
        if runtime.offline:
            console.print("[dim](offline model: set OPENAI_API_KEY or OPENAI_BASE_URL for a real one)[/dim]")
        print_reply(console, reply)
    return 1 if reply.failed else 0


def print_tools(runtime: Runtime, *, as_json: bool) -> int:
    tools = runtime.agent.tools()
    if as_json:
        sys.stdout.write(json.dumps([t.to_openai() for t in tools], ensure_ascii=False, indent=2) + "\n")
        return 0
    console = Console(highlight=False)
    if not tools and not runtime.host.problems():
        console.print(
            f"No tools: {runtime.settings.nerve_mcp_config} configures no MCP servers.", markup=False
        )
    for tool in tools:
        console.print(
            f"[bold]{escape(tool.name)}[/bold] [dim]({escape(tool.server)}, timeout {tool.timeout:g} s)[/dim]"
        )
        console.print(f"  {tool.description}", markup=False)
    for name, reason in runtime.host.problems():
        console.print(f"[red]{escape(name)} is not available:[/red] {escape(reason)}")
    return 0


def format_history(messages: Sequence[ChatMessage]) -> list[str]:
    lines = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            lines += [f"nerve → {call.name}({call.arguments})" for call in message.tool_calls]
        elif message.role == "tool":
            status = "error" if message.is_error else "ok"
            took = f"{message.latency_ms or 0:.0f} ms"
            lines.append(f"  {message.name} [{status}, {took}]: {(message.content or '')[:200]}")
        else:
            who = {"user": "you", "assistant": "nerve", "system": "system"}[message.role]
            lines.append(f"{who}: {message.content}")
    return lines


async def print_history(runtime: Runtime, thread: str) -> int:
    history = await runtime.store.history(conversation_key(thread))
    if not history:
        sys.stdout.write(f"Thread {thread!r} has no messages yet.\n")
        return 0
    sys.stdout.write("\n".join(format_history(history)) + "\n")
    return 0

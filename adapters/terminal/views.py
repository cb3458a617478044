"""What the terminal prints outside the chat loop: one-shot answers, the tool list, stored history.

Every piece of text that came from a model, a tool or a server passes `printable` before it is
printed; rich markup is applied only to what nerve writes itself.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from adapters.terminal.safe import printable, terminal_json
from bot.failures import shown_to_people
from bot.policy.scopes import Place
from bot.render import pretty_json
from bot.runtime import Runtime
from bot.seams import Store
from bot.text import scrub
from bot.types import AgentReply, Attachment, ChatMessage, ConversationKey, Incoming


def conversation_key(thread: str) -> ConversationKey:
    """Terminal threads belong to the local user, so two people on one machine keep theirs apart."""
    return ConversationKey(
        platform="terminal", workspace=scrub(getpass.getuser()), channel="cli", thread=scrub(thread)
    )


def shown(text: str) -> str:
    """Outside text ready for a rich markup string: harmless bytes, brackets escaped."""
    return escape(printable(text))


def attachment_line(index: int, attachment: Attachment) -> str:
    mark = "[red]✗[/red]" if attachment.is_error else "[green]✓[/green]"
    return (
        f"  [dim]▸ \\[{index}][/dim] {mark} [bold]{shown(attachment.name)}[/bold] "
        f"[dim]{attachment.latency_ms:.0f} ms — {shown(attachment.summary)}[/dim]"
    )


def print_attachment(console: Console, index: int, attachment: Attachment) -> None:
    """One tool result in full: the summary line, the arguments, the content."""
    console.print(attachment_line(index, attachment))
    console.print(f"[dim]arguments:[/dim] {shown(attachment.arguments_json())}")
    console.print(printable(pretty_json(attachment.content)), markup=False, highlight=False)
    if attachment.truncated:
        console.print("[dim](cut here; the full result is stored in the conversation)[/dim]")


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


def print_reply(console: Console, reply: AgentReply) -> None:
    for index, attachment in enumerate(reply.attachments, 1):
        console.print(attachment_line(index, attachment))
    console.print(Markdown(printable(reply.text)))
    if reply.attachments:
        console.print("[dim]/show N expands a tool result.[/dim]")


async def ask(runtime: Runtime, thread: str, text: str, *, as_json: bool) -> int:
    """One turn, then exit: for scripts and quick questions."""
    question = scrub(text)  # argv carries undecodable bytes as lone surrogates
    if not question.strip():
        sys.stderr.write("nerve: nothing to ask: give the question as an argument\n")
        return 2
    incoming = Incoming(key=conversation_key(thread), text=question, user_id=scrub(getpass.getuser()))
    reply = await runtime.agent.reply(incoming)
    if as_json:
        sys.stdout.write(terminal_json(reply_as_json(reply)) + "\n")
        return 1 if reply.failed else 0
    console = Console(highlight=False)
    if runtime.offline:
        console.print("[dim](offline model: set OPENAI_API_KEY or OPENAI_BASE_URL for a real one)[/dim]")
    print_reply(console, reply)
    return 1 if reply.failed else 0


def print_tools(runtime: Runtime, *, as_json: bool, place: Place | None = None) -> int:
    """The tools the model is offered: everywhere, or only those the policy allows in `place`."""
    every = runtime.agent.tools()
    tools = every if place is None else runtime.scopes.offered(place, every)
    if as_json:
        sys.stdout.write(terminal_json([t.to_openai() for t in tools]) + "\n")
        return 0
    console = Console(highlight=False)
    if place is not None:
        console.print(place_line(runtime, place))
    if not every and not runtime.host.problems():
        console.print(
            f"No tools: {runtime.settings.nerve_mcp_config} configures no MCP servers.", markup=False
        )
    for tool in tools:
        asks = ", asks before running" if tool.needs_approval else ""
        console.print(
            f"[bold]{shown(tool.name)}[/bold] "
            f"[dim]({shown(tool.server)}, timeout {tool.timeout:g} s{asks})[/dim]"
        )
        console.print(f"  {printable(tool.description)}", markup=False)
    offered = {t.name for t in tools}
    held_back = [t for t in every if t.name not in offered]
    if held_back:
        names = ", ".join(f"{t.server}/{t.original_name}" for t in held_back)
        console.print(f"[dim]Not offered here:[/dim] {shown(names)}")
    for name, reason in runtime.host.problems():
        console.print(f"[red]{shown(name)} is not available:[/red] {shown(reason)}")
    return 0


def place_line(runtime: Runtime, place: Place) -> str:
    """Which policy rule decides for `place`, so an admin sees why a tool is or is not offered."""
    found = runtime.scopes.rule_for(place)
    if found is None:
        return "[dim]No policy rule applies here: every tool is offered.[/dim]"
    return f"[dim]Policy rule {shown(repr(found[0]))} decides here.[/dim]"


def format_history(messages: Sequence[ChatMessage]) -> list[str]:
    lines = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            lines += [f"nerve → {call.name}({call.arguments})" for call in message.tool_calls]
        elif message.role == "tool":
            status = "error" if message.is_error else "ok"
            took = f"{message.latency_ms or 0:.0f} ms"
            lines.append(f"  {message.name} [{status}, {took}]: {shown_to_people(message)[:200]}")
        else:
            who = {"user": "you", "assistant": "nerve", "system": "system"}[message.role]
            lines.append(f"{who}: {message.content}")
    return lines


async def print_history(store: Store, thread: str) -> int:
    """A stored conversation as plain lines; needs only the store, no servers and no model."""
    history = await store.history(conversation_key(thread))
    if not history:
        sys.stdout.write(printable(f"Thread {scrub(thread)!r} has no messages yet.") + "\n")
        return 0
    sys.stdout.write(printable("\n".join(format_history(history))) + "\n")
    return 0

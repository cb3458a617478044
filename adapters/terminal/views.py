"""What the terminal prints outside the chat loop: one-shot answers, the tool list, stored history.

Text from a model, a tool or a server passes `printable` first; rich markup is only nerve's own."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console

from adapters.resources import display_name, file_label, kind_of
from adapters.terminal.approve import settle_one_shot
from adapters.terminal.fill_in import FillIn
from adapters.terminal.keyboard import interruptible, read_line
from adapters.terminal.live import PlainAnswer
from adapters.terminal.safe import answer_markdown, printable, say, shown, terminal_json
from bot.agent import shown_to_people
from bot.text import pretty_json, scrub, show_link_targets, truncate
from bot.types import (
    AgentReply,
    Attachment,
    AuditEntry,
    ChatMessage,
    ConversationKey,
    Incoming,
    Place,
    Progress,
    RememberedApproval,
    Resource,
    SharedFile,
    no_progress,
)

if TYPE_CHECKING:  # the MCP client is loaded only by the commands that start servers
    from bot.runtime import Runtime

# Characters of one text a tool returned that `/show` prints (a call's own result is capped by the
# core); the whole text stays with the tool's server.
TEXT_SHOWN = 20_000


def conversation_key(thread: str) -> ConversationKey:
    """Terminal threads belong to the local user, so two people on one machine keep theirs apart."""
    return ConversationKey(
        platform="terminal", workspace=scrub(getpass.getuser()), channel="cli", thread=scrub(thread)
    )


def terminal_incoming(key: ConversationKey, text: str, files: Sequence[SharedFile] = ()) -> Incoming:
    """A message typed here by the OS user, in the one place the whole terminal is, with the files
    attached to it."""
    place = Place(platform="terminal", channel="cli", user=key.workspace)
    return Incoming(key=key, text=text, user_id=key.workspace, place=place, files=tuple(files))


def attachment_line(index: int, attachment: Attachment) -> str:
    mark = "[red]✗[/red]" if attachment.is_error else "[green]✓[/green]"
    return (
        f"  [dim]▸ \\[{index}][/dim] {mark} [bold]{shown(attachment.name)}[/bold] "
        f"[dim]{attachment.latency_ms:.0f} ms{f' · {shown(attachment.server)}' if attachment.server else ''}"
        f" — {shown(show_link_targets(attachment.summary))}[/dim]"
    )


def print_line(console: Console, markup: str, *, highlight: bool | None = None) -> None:
    """One line that never wraps: on a terminal cut to its width with `…`, elsewhere whole."""
    if console.is_terminal:
        console.print(markup, no_wrap=True, overflow="ellipsis", crop=True, highlight=highlight)
    else:
        console.print(markup, soft_wrap=True, highlight=highlight)


def resource_line(resource: Resource) -> str | None:
    """One line under a call for a resource: a link (never opened), a listed file, a text `/show` prints."""
    kind = kind_of(resource)
    name = shown(display_name(resource))
    if kind == "link":
        return f"    [dim]↗[/dim] {name}: {shown(resource.uri)}"
    if kind == "file":
        return f"    [dim]{shown(f'[file {file_label(resource)}]')}[/dim]"
    if kind == "text":
        size = f"{len(resource.text or ''):,} characters"
        return f"    [dim]📄[/dim] {name} [dim]({shown(resource.mime_type or 'text')}, {size})[/dim]"
    return None


def print_resource_lines(console: Console, attachment: Attachment) -> None:
    for line in filter(None, map(resource_line, attachment.resources)):
        print_line(console, line, highlight=False)


def print_attachment(console: Console, index: int, attachment: Attachment) -> None:
    """One tool result in full: summary, arguments, content, then its resources and texts (capped)."""
    print_line(console, attachment_line(index, attachment))
    console.print(f"[dim]arguments:[/dim] {shown(attachment.arguments_json())}")
    console.print(printable(pretty_json(attachment.content)), markup=False, highlight=False)
    if attachment.truncated:
        console.print("[dim](cut here; the full result is stored in the conversation)[/dim]")
    print_resource_lines(console, attachment)
    for resource in (r for r in attachment.resources if kind_of(r) == "text"):
        kind = shown(resource.mime_type or "text")
        console.print(f"[dim]── {shown(display_name(resource))} ({kind}) ──[/dim]")
        text, cut = truncate(resource.text or "", TEXT_SHOWN)
        console.print(printable(text), markup=False, highlight=False)
        if cut:
            console.print(f"[dim](cut here: {len(resource.text or ''):,} characters in all)[/dim]")


def reply_as_json(reply: AgentReply, audit: Sequence[AuditEntry] = ()) -> dict[str, Any]:
    """The shape `nerve ask --json` prints, stable for scripts: each call's `server` (null when none
    was reached), its `approval` decision and who `decided_by` (null when none was recorded)."""
    decided = {entry.call_id: entry for entry in audit}
    return {
        "text": reply.text,
        "error": reply.failed,
        "tool_calls": [
            {
                "name": a.name,
                "server": a.server,
                "arguments": a.arguments,
                "is_error": a.is_error,
                "content": a.content,
                "approval": decided[a.tool_call_id].outcome if a.tool_call_id in decided else None,
                "decided_by": decided[a.tool_call_id].who if a.tool_call_id in decided else None,
            }
            for a in reply.attachments
        ],
    }


def print_reply(console: Console, reply: AgentReply, *, text: bool = True) -> None:
    """A reply in the chat: a line per tool result, then the text (unless off a terminal: written already)."""
    for index, attachment in enumerate(reply.attachments, 1):
        print_line(console, attachment_line(index, attachment))
        print_resource_lines(console, attachment)
    if text:
        console.print(answer_markdown(reply.text))
    if reply.attachments:
        texts = any(kind_of(r) == "text" for a in reply.attachments for r in a.resources)
        more = " and the texts it returned" if texts else ""
        console.print(f"[dim]/show N expands a tool result{more}.[/dim]")


async def ask(
    runtime: Runtime,
    thread: str,
    text: str,
    *,
    as_json: bool,
    approve_all: bool = False,
    files: Sequence[SharedFile] = (),
) -> int:
    """One turn, then exit: the answer alone on stdout, hints and progress on stderr. Off a terminal
    calls needing approval are denied (unless `approve_all`) and questions declined: a script never waits."""
    key = conversation_key(thread)
    user = key.workspace
    # argv carries undecodable bytes as lone surrogates: scrubbed here.
    incoming = terminal_incoming(key, scrub(text), files)
    notes = Console(file=sys.stderr, highlight=False)
    answer = PlainAnswer(sys.stdout, sys.stderr)
    progress: Progress = no_progress if as_json else answer.progress
    if runtime.offline and not as_json:
        notes.print("[dim](offline model: set OPENAI_API_KEY or OPENAI_BASE_URL for a real one)[/dim]")
    agent = runtime.agent
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    # The chat's line reader only where a person types.
    async with FillIn(agent, user, read_line if interactive else None, notes) as questions:
        progress = questions.watching(progress)
        reply = await interruptible(agent.reply(incoming, progress))
        if reply.approval is not None or questions.parked:
            if interactive and not as_json and not questions.parked:
                answer.finish(reply.text)
            reply = await interruptible(settle_one_shot(questions, reply, progress, approve_all=approve_all))
    if as_json:
        audit = await agent.audit_log(key)
        # The conversation's name, so a script can continue it with --thread.
        sys.stdout.write(terminal_json({**reply_as_json(reply, audit), "thread": key.thread}) + "\n")
    else:
        answer.finish(reply.text)
    return 1 if reply.failed else 0


def print_tools(runtime: Runtime, *, as_json: bool, place: Place | None = None) -> int:
    """The tools offered, everywhere or in `place`; 1 when no configured server is available, for scripts."""
    every = runtime.agent.tools()
    tools = every if place is None else runtime.scopes.offered(place, every)
    states = runtime.host.server_states()
    code = 1 if states and not any(states.values()) else 0
    if as_json:
        sys.stdout.write(terminal_json([t.to_openai() for t in tools]) + "\n")
        return code
    console = Console(highlight=False)
    if place is not None:  # which policy rule decides, so an admin sees why a tool is or is not offered
        found = runtime.scopes.rule_for(place)
        rule = "No policy rule applies here: every tool is offered"
        if found is not None:
            rule = f"Policy rule {shown(repr(found[0]))} decides here"
        console.print(f"[dim]{rule}.[/dim]")
        # Which model answers here: the place's own in the policy, else the primary.
        console.print(f"[dim]Model here: {shown(runtime.model_for(place))}.[/dim]")
    if not runtime.host.list_tools() and not runtime.host.problems():
        console.print(
            f"No tools: {runtime.settings.nerve_mcp_config} configures no MCP servers.", markup=False
        )
    for tool in tools:
        asks = ", asks before running" if tool.needs_approval else ""
        about = f"{shown(tool.server)}, timeout {tool.timeout:g} s{asks}"
        console.print(f"[bold]{shown(tool.name)}[/bold] [dim]({about})[/dim]")
        console.print(f"  {printable(show_link_targets(tool.description))}", markup=False)
    offered = {t.name for t in tools}
    held_back = [t for t in every if t.name not in offered]
    if held_back:
        names = ", ".join(f"{t.server}/{t.original_name}" for t in held_back)
        console.print(f"[dim]Not offered here:[/dim] {shown(names)}")
    for name, reason in runtime.host.problems():
        console.print(f"[red]{shown(name)} is not available:[/red] {shown(reason)}")
    return code


def format_history(messages: Sequence[ChatMessage], audit: Sequence[AuditEntry] = ()) -> list[str]:
    """A conversation as plain lines; under each tool call, who decided it might run, and when."""
    decided: dict[str, list[AuditEntry]] = {}
    for entry in audit:
        decided.setdefault(entry.call_id, []).append(entry)
    lines: list[str] = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                lines.append(f"nerve → {call.name}({call.arguments})")
                lines += [f"  {decision_line(entry)}" for entry in decided.pop(call.id, [])]
        elif message.role == "tool":
            status = "error" if message.is_error else "ok"
            took = f"{message.latency_ms or 0:.0f} ms"
            lines.append(f"  {message.name} [{status}, {took}]: {shown_to_people(message)[:200]}")
        else:
            who = {"user": "you", "assistant": "nerve", "system": "system"}[message.role]
            lines.append(f"{who}: {message.content}")
    # Decisions on calls whose round is not stored yet: the turn still waits for a person.
    rest = [entry for entries in decided.values() for entry in entries]
    if rest:
        lines.append("waiting for approval (decided so far):")
        lines += [f"  {entry.tool} on {entry.server}: {decision_line(entry)}" for entry in rest]
    return lines


def decision_line(entry: AuditEntry) -> str:
    """`approved by alice at 2026-12-02 10:15:03 UTC`, or `auto: read-only` for what ran unasked."""
    when = f" at {_utc(entry.at)}" if entry.at else ""
    if entry.who == "nerve" or entry.outcome.startswith(("auto:", "expired")):
        return f"{entry.outcome}{when}"
    return f"{entry.outcome} by {entry.who}{when}"


def _utc(stamp: str) -> str:
    """The store's `2026-12-02T10:15:03.123Z` as `2026-12-02 10:15:03 UTC`."""
    day, _, clock = stamp.partition("T")
    return f"{day} {clock[:8]} UTC" if clock else stamp


def write_table(rows: Sequence[tuple[str, ...]]) -> None:
    """Rows on stdout in aligned columns, the last one left ragged."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        say("  ".join([*cells, row[-1]]))


class _Remembered(Protocol):
    """What `nerve approvals` reads and changes (the front ends do not import the store)."""

    async def remembered_approvals(self, place: str | None = None) -> list[RememberedApproval]: ...

    async def revoke(self, place: str, server: str, tool: str) -> bool: ...


async def print_approvals(store: _Remembered) -> int:
    remembered = await store.remembered_approvals()
    if not remembered:
        sys.stdout.write("No remembered approvals: every call that needs approval asks.\n")
        return 0
    write_table(
        [
            (r.place, r.server, r.tool, f"granted by {r.granted_by} at {_utc(r.granted_at)}")
            for r in remembered
        ]
    )
    sys.stdout.write("Revoke one with: nerve approvals revoke PLACE SERVER TOOL\n")
    return 0


async def revoke_approval(store: _Remembered, place: str, server: str, tool: str) -> int:
    named = f"{tool} of server {server} in {place}"
    if not await store.revoke(place, server, tool):
        say(f"nerve: no remembered approval for {named} (see: nerve approvals)", sys.stderr)
        return 1
    say(f"Revoked: {named} asks again from now on.")
    return 0

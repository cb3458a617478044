"""The chat's `/attach` and its offer to attach a path typed or pasted alone on a line."""

from __future__ import annotations

import asyncio

from rich.console import Console

from adapters.terminal.files import Attachments, described, local_file, paths_written
from adapters.terminal.keyboard import ReadLine
from adapters.terminal.safe import printable, shown
from bot.errors import FileRefused

USAGE = "/attach PATH attaches a file to your next question; /attach clear forgets them."


async def attach_command(attachments: Attachments, argument: str, console: Console) -> None:
    """`/attach PATH …` attaches, `/attach` alone lists, `/attach clear` forgets them all."""
    written = argument.strip()
    if not written:
        _list(attachments, console)
        return
    if written == "clear":
        count = attachments.clear()
        said = "Nothing was attached." if not count else f"Cleared {count} attachment{'s' * (count != 1)}."
        console.print(said, markup=False)
        return
    for path in await asyncio.to_thread(paths_written, written):
        await attach(attachments, path, console)


async def attach(attachments: Attachments, path: str, console: Console) -> bool:
    """Attach the file at `path`, or say in one line why not; whether it was attached."""
    try:
        file = await asyncio.to_thread(local_file, path)
    except FileRefused as exc:
        console.print(f"[red]{shown(exc.message)}[/red]")
        return False
    attachments.add(file)
    console.print(f"[dim]Attached {shown(described(file))}: it goes with your next question.[/dim]")
    return True


async def offer(attachments: Attachments, path: str, read: ReadLine, console: Console) -> bool | None:
    """A line that is only a path to a file: ask whether to attach it. True when attached, False when
    declined (the line is then a question as typed), None when the person cancelled (Ctrl-C)."""
    try:
        file = await asyncio.to_thread(local_file, path)
    except FileRefused:  # gone since it was looked at: the line is a question as typed
        return False
    answer = await read(f"Attach {printable(described(file))} to your next question? [Y/n] ")
    if answer is None:
        return None
    if answer.strip().lower() not in ("", "y", "yes"):
        return False
    attachments.add(file)
    console.print("[dim]Attached: it goes with your next question. /attach lists what is attached.[/dim]")
    return True


def _list(attachments: Attachments, console: Console) -> None:
    files = attachments.listed()
    if not files:
        console.print(f"Nothing attached. {USAGE}", markup=False)
        return
    console.print("Attached to your next question:", markup=False)
    for file in files:
        console.print(f"  {shown(described(file))} [dim]{shown(file.ref)}[/dim]")
    console.print("[dim]/attach clear forgets them.[/dim]")

"""`/forget-me` and `/export [FILE]` in the terminal chat: the person's data rights, for the login
that runs it (the terminal is theirs alone).

Forgetting is asked first (y/N; anything but yes keeps everything). The export is written as one
JSON file readable by its owner only, since it holds their conversations. What is stored and deleted
is the façade's to decide (`Agent.forget_person`, `Agent.export_person`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from adapters.common import rights
from adapters.terminal.keyboard import ReadLine
from bot.types import ConversationKey

if TYPE_CHECKING:  # the façade loads the MCP client; this module is imported by the chat alone
    from bot.agent import Agent


async def forget_me(agent: Agent, key: ConversationKey, user: str, console: Console, read: ReadLine) -> None:
    """`/forget-me`: asked first, then what went, in counts."""
    answer = await read(rights.FORGET_QUESTION + " [y/N] ")
    if (answer or "").strip().lower() not in ("y", "yes"):
        console.print(rights.NOTHING_DELETED, markup=False)
        return
    console.print(rights.forgotten_text(await agent.forget_person(key, user)), markup=False)


async def export_me(agent: Agent, key: ConversationKey, user: str, argument: str, console: Console) -> None:
    """`/export [FILE]`: everything stored about the person into FILE (nerve-export.json here without it)."""
    written = argument.strip() or rights.EXPORT_NAME
    text = rights.export_text(await agent.export_person(key, user))
    try:
        target = await asyncio.to_thread(_write_private, written, text)
    except OSError as exc:
        console.print(f"Could not write {written}: {exc.strerror or exc}", markup=False)
        return
    console.print(f"Wrote everything stored about you to {target} (readable by you only).", markup=False)


def _write_private(written: str, text: str) -> Path:
    """Write `text` to the file named `written` (~ and relative names as a shell takes them); its path."""
    path = Path(written).expanduser().absolute()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file that was there keeps no wider mode
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    return path

"""`/memory` in the chat: what nerve remembers about the person (the terminal is theirs alone, so
every memory of theirs is used here), and forgetting or sharing one by its id.

A renderer only: what may be seen and forgotten is the façade's to decide. Memory text was written
by a person or a model: it is printed through `shown`, never read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from adapters.common import memory_words as words
from adapters.terminal.keyboard import ReadLine
from adapters.terminal.safe import shown
from bot.types import Incoming, Memory

if TYPE_CHECKING:  # the façade loads the MCP client; this module is imported by the chat alone
    from bot.agent import Agent

USAGE = words.HOW_TO_USE.replace("`memory", "`/memory").replace("`", "")


def print_memories(console: Console, memories: list[Memory]) -> None:
    parts = words.sections(memories)
    if not parts:
        console.print(words.NOTHING, markup=False)
        return
    for part in parts:
        console.print(f"[bold]{shown(part.title)}[/bold]")
        for memory in part.memories:
            marker = words.where_used(memory)
            line = f"  [cyan]{shown(memory.id)}[/cyan]  {shown(memory.text)}"
            console.print(line + (f"  [dim]{shown(marker)}[/dim]" if marker else ""))
    console.print("[dim]/memory forget ID · /memory forget all · /memory anywhere ID on|off[/dim]")


async def memory_command(
    agent: Agent, here: Incoming, argument: str, console: Console, read: ReadLine
) -> None:
    """`/memory [forget ID|all | anywhere ID on|off]`."""
    if agent.memory is None:
        console.print(words.MEMORY_OFF, markup=False)
        return
    typed = argument.split()
    said = [word.lower() for word in typed]
    if not said:
        print_memories(console, await agent.memories(here))
    elif said == ["forget", "all"]:
        await _forget_all(agent, here, console, read)
    elif len(said) == 2 and said[0] == "forget":
        forgotten = await agent.forget_memory(here, typed[1])
        text = words.forgotten(forgotten) if forgotten else words.NO_SUCH.format(id=typed[1])
        console.print(text.replace("`", ""), markup=False)
    elif len(said) == 3 and said[0] == "anywhere" and said[2] in ("on", "off"):
        changed = await agent.use_memory_anywhere(here, typed[1], said[2] == "on")
        console.print(words.anywhere_set(said[2] == "on", changed), markup=False)
    else:
        console.print(USAGE, markup=False)


async def _forget_all(agent: Agent, here: Incoming, console: Console, read: ReadLine) -> None:
    mine = sum(1 for memory in await agent.memories(here) if memory.kind == "person")
    if not mine:
        console.print(words.forgot_all(0), markup=False)
        return
    answer = await read(words.forget_all_question(mine) + " [y/N] ")
    if (answer or "").strip().lower() not in ("y", "yes"):
        console.print("Kept them all.", markup=False)
        return
    console.print(words.forgot_all(await agent.forget_my_memories(here)), markup=False)

"""What a turn's requests start with: the system prompt with the place's memories, and the turn's note.

Apart from the loop because it is worked out once a turn and then sent unchanged every round: what is
the same for every turn of a place comes first and alone in the system prompt, so a provider's cache
keeps the start of every request, and what is the turn's own (the time now, the person's memories)
goes in a note at the end of its message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.memory.prompt import memory_sections
from bot.memory.scope import turn_scope
from bot.memory.tools import MEMORY_SERVER, MemoryTools
from bot.policy.scopes import Scopes
from bot.seams import PlacedTools, PromptNote, ToolHost
from bot.types import Incoming, Platforms


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPrompt:
    """What a turn's requests start with (`system`), and the note its own message ends with."""

    system: str
    note: str = ""


async def turn_prompt(
    incoming: Incoming,
    *,
    system: str,
    scopes: Scopes,
    builtins: Mapping[str, ToolHost],
    memory: MemoryTools | None,
    memory_tokens: int,
    platforms: Platforms,
) -> TurnPrompt:
    """`system` with the place's memories, and the turn's note (the time now, the person's memories),
    both the same every round; `memory_tokens` is the most the memories take."""
    prompt, notes = system, []
    # A built-in's line (the time now, for schedules), where the policy offers its tools.
    for host in builtins.values():
        offered = scopes.offered(incoming.where(), host.list_tools())
        if isinstance(host, PlacedTools) and not host.offered_in(incoming):
            continue
        if isinstance(host, PromptNote) and offered and (note := await host.prompt_note(incoming)):
            notes.append(note)
    # Where the policy hides memory, none is sent either.
    if memory is not None and scopes.allows(incoming.where(), MEMORY_SERVER, "recall"):
        scope = turn_scope(incoming, platforms)
        sections = await memory_sections(memory.ledger, scope, incoming.text, memory_tokens)
        prompt = f"{prompt}\n\n{sections.place}" if sections.place else prompt
        notes += [sections.person] if sections.person else []
    return TurnPrompt(system=prompt, note="\n\n".join(notes))

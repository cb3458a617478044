"""A memory: what a person asked nerve to remember, about themselves or about a place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MemoryKind = Literal["person", "place"]
# What an Undo under a reply did: forgot it, found it forgotten already, or found it someone else's.
UndoOutcome = Literal["forgotten", "gone", "not_yours"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    id: str
    kind: MemoryKind
    # The person's id (`bot.mcp.auth.people.person_of`) or the place's (`bot.memory.scope`).
    subject: str
    text: str
    # A personal memory its person lets nerve use in shared places too.
    anywhere: bool
    written_by: str
    written_in: str
    created_at: str

"""What the memory list, its buttons and an Undo say, written once in plain words: each surface
renders them in its own markup (and escapes the memory's text, which a person or a model wrote)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.types import Memory, Remembered, UndoOutcome

YOURS = "Yours"
THIS_PLACE = "This place"
ANYWHERE = "🌐 used anywhere"
DMS_ONLY = "🔒 used in DMs only"
NOTHING = "I remember nothing about you or this place yet. Ask me to remember something and I will."
MEMORY_OFF = "Memory is not on here: nerve runs without a store for it."
FORGET = "Forget"
FORGET_ALL = "Forget all of mine"
USE_ANYWHERE = "Use anywhere"
DMS_ONLY_BUTTON = "DMs only"
UNDO = "Undo"
CONFIRM_FORGET_ALL = "Yes, forget all"
NOT_YOURS = (
    "That memory is not yours to forget: only the person it is about (or, for a place's, an admin) can."
)
ALREADY_GONE = "That memory is already forgotten."
NO_SUCH = "No memory {id} of yours or of this place: `memory` lists them with their ids."
HOW_TO_USE = "Write it as `memory`, `memory forget ID`, `memory forget all` or `memory anywhere ID on|off`."
# How many memories of each kind a list shows (a message holds only so many buttons).
LISTED = 20


@dataclass(frozen=True, slots=True)
class Section:
    """One part of the list: its title and its memories, newest first."""

    title: str
    memories: tuple[Memory, ...]


def sections(memories: list[Memory]) -> list[Section]:
    """The person's own memories, then the place's, each cut to `LISTED`; empty parts left out."""
    mine = tuple(m for m in memories if m.kind == "person")[:LISTED]
    place = tuple(m for m in memories if m.kind == "place")[:LISTED]
    return [s for s in (Section(YOURS, mine), Section(THIS_PLACE, place)) if s.memories]


def where_used(memory: Memory) -> str:
    """A personal memory's marker: used in DMs only, or anywhere; "" for a place's."""
    if memory.kind != "person":
        return ""
    return ANYWHERE if memory.anywhere else DMS_ONLY


def forgotten(memory: Memory) -> str:
    return f"Forgotten: {memory.text}"


def undone(outcome: UndoOutcome, *, undo: bool = True) -> str:
    """What the person who pressed Undo (or a list's Forget, `undo` False) is told."""
    if outcome == "forgotten":
        return "Undone: I have forgotten it." if undo else "Forgotten."
    return NOT_YOURS if outcome == "not_yours" else ALREADY_GONE


def undo_label(remembered: Remembered, count: int) -> str:
    """One Undo when a reply saved one memory; with several, each names its memory."""
    return UNDO if count == 1 else f"{UNDO}: {remembered.text}"


def forget_all_question(count: int) -> str:
    return f"Forget all {count} of your own memories, everywhere? This cannot be undone."


def forgot_all(count: int) -> str:
    return "You had no memories of your own." if count == 0 else f"Forgotten: all {count} of your memories."


def anywhere_set(anywhere: bool, changed: bool) -> str:
    if not changed:
        return "Only your own memories can be shared: that id is not one of yours."
    return (
        "I will use that memory anywhere you talk to me, shared places too."
        if anywhere
        else "I will use that memory in DMs only."
    )

"""`nerve memory`: what people asked nerve to remember, for whoever runs it: a person's, a place's or
every memory, newest first, and an operator's `forget`. It reads the store alone: no model, no servers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import Any

from adapters.terminal.safe import say, terminal_json
from adapters.terminal.views import _utc, write_table
from bot.config import Settings
from bot.memory.scope import memory_place
from bot.policy.scopes import Place
from bot.store.choose import open_configured_store
from bot.types import Memory

Job = Callable[[Settings], Coroutine[Any, Any, int]]

# The newest this many are listed; more are said to exist (narrow the list with --user or --place).
LIST_LIMIT = 1000


def list_job(person: str | None, place: Place | None, *, as_json: bool) -> Job:
    """`nerve memory [--user ID] [--place PLACE] [--json]`: with both, the person's and the place's."""
    subject = memory_place(place) if place is not None else None

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            found = await store.memories_of(person=person, place=subject, limit=LIST_LIMIT + 1)
        shown, more = found[:LIST_LIMIT], len(found) > LIST_LIMIT
        if as_json:
            sys.stdout.write(terminal_json({"memories": [_json(m) for m in shown], "more": more}) + "\n")
            return 0
        if not shown:
            say(f"No memories{_of(person, subject)}.")
            return 0
        write_table([_row(m) for m in shown])
        if more:
            say(f"Only the newest {LIST_LIMIT} are shown: narrow the list with --user or --place.")
        say("Forget one with: nerve memory forget ID")
        return 0

    return job


def forget_job(memory_id: str) -> Job:
    """`nerve memory forget ID`: whoever's it is; the operator answers for the deployment."""

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            memory = await store.memory(memory_id.strip())
            if memory is None or not await store.delete_memory(memory.id):
                say(f"nerve: no memory with id {memory_id!r} (see: nerve memory)", sys.stderr)
                return 1
        say(f"Forgot {memory.id} ({_whose(memory)}): {memory.text}")
        return 0

    return job


def _of(person: str | None, place: str | None) -> str:
    named = ([f"of {person}"] if person else []) + ([f"of place {place}"] if place else [])
    return (" " + " or ".join(named)) if named else ""


def _whose(memory: Memory) -> str:
    return f"{memory.kind} {memory.subject}"


def _reach(memory: Memory) -> str:
    """Where a turn may be sent it: a place's in its place; a person's in their DMs, or anywhere."""
    if memory.kind == "place":
        return "its place"
    return "anywhere" if memory.anywhere else "DMs only"


def _row(memory: Memory) -> tuple[str, ...]:
    return (
        memory.id,
        _whose(memory),
        _reach(memory),
        _utc(memory.created_at),
        f"by {memory.written_by}",
        memory.text,
    )


def _json(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "kind": memory.kind,
        "about": memory.subject,
        "text": memory.text,
        "anywhere": memory.anywhere,
        "saved": memory.created_at,
        "written_by": memory.written_by,
        "written_in": memory.written_in,
    }

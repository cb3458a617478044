"""What a person may see and manage of the memories outside a turn: a list's buttons, an Undo.

The memory tools bind every call to its turn's scope (`bot.memory.tools`); the front ends' lists and
buttons act between turns, so the same rules (a person manages their own memories and their place's,
a place memory goes by its writer's or an admin's word) are applied here, in one place for all of them.
"""

from __future__ import annotations

from bot.memory.scope import turn_scope
from bot.memory.tools import MemoryTools, may_forget
from bot.policy.platforms import Platforms
from bot.policy.scopes import Scopes
from bot.store.memories import MemoryLedger
from bot.types import Incoming, Memory, UndoOutcome


class MemoryManager:
    """People's own management of memories; without memory tools (no ledger) there is nothing to manage."""

    def __init__(self, tools: MemoryTools | None, *, platforms: Platforms, admins: frozenset[str]) -> None:
        self.tools = tools
        self._platforms = platforms
        self._admins = admins

    @classmethod
    def over(
        cls, ledger: MemoryLedger | None, *, platforms: Platforms, admins: frozenset[str], scopes: Scopes
    ) -> MemoryManager:
        """The memory tools over `ledger` (none without one) and their management by the same rules."""
        tools = (
            MemoryTools(ledger, platforms=platforms, admins=admins, scopes=scopes)
            if ledger is not None
            else None
        )
        return cls(tools, platforms=platforms, admins=admins)

    async def memories(self, incoming: Incoming) -> list[Memory]:
        """All the person's own memories (shown to them alone) and the place's."""
        if self.tools is None:
            return []
        scope = turn_scope(incoming, self._platforms)
        return await self.tools.ledger.memories_of(person=scope.person, place=scope.place)

    async def forget(self, incoming: Incoming, memory_id: str) -> Memory | None:
        """The memory forgotten; None when it is not the person's to forget: another person's, or a
        place memory someone else wrote (admins may)."""
        if self.tools is None:
            return None
        scope = turn_scope(incoming, self._platforms)
        memory = await self.tools.ledger.memory(memory_id)
        admin = incoming.user_id in self._admins
        if memory is None or not may_forget(memory, scope, admin):
            return None
        return memory if await self.tools.ledger.delete_memory(memory.id) else None

    async def use_anywhere(self, incoming: Incoming, memory_id: str, anywhere: bool) -> bool:
        """Only a person's own memory may be let into shared places (or out of them again)."""
        if self.tools is None:
            return False
        scope = turn_scope(incoming, self._platforms)
        memory = await self.tools.ledger.memory(memory_id)
        if memory is None or memory.kind != "person" or memory.subject != scope.person:
            return False
        return await self.tools.ledger.set_memory_anywhere(memory.id, anywhere)

    async def undo(self, incoming: Incoming, memory_id: str) -> UndoOutcome:
        """Forget for whoever pressed Undo, and say why not: forgotten already ("gone"), or not theirs
        to forget ("not_yours")."""
        if self.tools is None or await self.tools.ledger.memory(memory_id) is None:
            return "gone"
        return "forgotten" if await self.forget(incoming, memory_id) is not None else "not_yours"

    async def forget_all_of(self, incoming: Incoming) -> int:
        """Every personal memory of the person of `incoming`; how many there were."""
        if self.tools is None:
            return 0
        scope = turn_scope(incoming, self._platforms)
        return await self.tools.ledger.delete_memories_of(scope.person)

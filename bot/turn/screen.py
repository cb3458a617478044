"""Which calls of a turn wait for a person, and the audit of those that ran without asking.

The rules are pure (`bot.policy`); this applies them to one turn with the store behind it: each
checked call runs at once or is held back for a person (`bot.asks` decides on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.policy.approval import call_hash
from bot.policy.places import place_id
from bot.types import AuditEntry, ConversationKey, Incoming, ToolCall, ToolSpec


class ScreenStore(Protocol):
    """What screening needs of the store (`bot.store.approvals.ApprovalLedger` fills it)."""

    async def remembered(self, place: str, server: str, tool: str) -> str | None: ...

    async def record_audit(self, key: ConversationKey, entries: Sequence[AuditEntry]) -> None: ...


@dataclass(slots=True)
class TurnScreen:
    """Screens the calls of one turn and collects the audit of what ran without asking."""

    store: ScreenStore
    incoming: Incoming
    audit: list[AuditEntry] = field(default_factory=list)

    async def __call__(self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any]) -> bool:
        """True when the call must wait for a person."""
        place = place_id(self.incoming.where())
        if not spec.needs_approval:
            outcome = "auto: approval not required" if spec.approval == "never" else "auto: read-only"
        else:
            remembered = await self.store.remembered(place, spec.server, spec.original_name)
            if remembered is None or remembered != spec.definition_hash:
                return True
            outcome = "auto: always-allowed here"
        self.audit.append(audit_entry(self.incoming, spec, call, arguments, outcome, who="nerve"))
        return False


def audit_entry(
    incoming: Incoming, spec: ToolSpec, call: ToolCall, arguments: dict[str, Any], outcome: str, *, who: str
) -> AuditEntry:
    return AuditEntry(
        who=who,
        place=place_id(incoming.where()),
        server=spec.server,
        tool=spec.original_name,
        call_id=call.id,
        arguments_hash=call_hash(spec.server, spec.original_name, arguments),
        outcome=outcome,
    )

"""Screening a round's tool calls: which run at once, which wait for their person's word.

Apart from the loop because this is where the approval policy meets a round's calls: a call a tool's
text may have led to, one that acts as its person later, and one a person always allowed here are
each told apart once, and what ran without asking is kept for the audit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.memory.secrets import secret_kind
from bot.memory.tools import MEMORY_SERVER
from bot.policy.approval import call_hash
from bot.policy.scopes import place_id
from bot.schedules.tools import SCHEDULES_SERVER
from bot.seams import ConfirmedTools, ToolHost
from bot.store.approvals import ApprovalLedger
from bot.types import AuditEntry, Incoming, Proposal, ToolCall, ToolResult, ToolSpec


@dataclass(slots=True)
class TurnScreen:
    """Screens the calls of one turn and collects the audit of what ran without asking."""

    store: ApprovalLedger
    incoming: Incoming
    # The model's context holds tool results: text no person wrote, which may carry instructions.
    read_by_tools: bool = False
    audit: list[AuditEntry] = field(default_factory=list)
    # The built-in tool hosts by server name: some hold their calls for their person's own word.
    builtins: Mapping[str, ToolHost] = field(default_factory=dict)

    async def __call__(
        self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any]
    ) -> bool | Proposal | ToolResult:
        # What acts as its person later (a schedule) waits for their word every time, once checked:
        # a call that cannot be made is refused to the model without asking anyone.
        host = self.builtins.get(spec.server)
        if isinstance(host, ConfirmedTools) and host.confirmed(spec):
            return await host.proposal(arguments, self.incoming)
        # What a tool's text may have led to (a memory planted, or one deleted) waits for its person's
        # OK, whatever else is allowed; a secret is refused outright when it runs, never shown on a card.
        led_by_tools = spec.server == MEMORY_SERVER and self.read_by_tools
        if led_by_tools and spec.original_name == "forget":
            return True
        # Cancelled is final: a cancel a tool's text may have led to waits for its person's OK too.
        if spec.server == SCHEDULES_SERVER and spec.original_name == "cancel_schedule" and self.read_by_tools:
            return True
        if (
            led_by_tools
            and spec.original_name == "remember"
            and not secret_kind(str(arguments.get("text", "")))
        ):
            return True
        place = place_id(self.incoming.where())
        if not spec.needs_approval:
            outcome = "auto: approval not required" if spec.approval == "never" else "auto: read-only"
        else:
            # Only while the tool is still defined as it was when a person chose "always allow here".
            if await self.store.remembered(place, spec.server, spec.original_name) != spec.definition_hash:
                return True
            outcome = "auto: always-allowed here"
        self.audit.append(
            AuditEntry(
                who="nerve",
                place=place,
                server=spec.server,
                tool=spec.original_name,
                call_id=call.id,
                arguments_hash=call_hash(spec.server, spec.original_name, arguments),
                outcome=outcome,
            )
        )
        return False

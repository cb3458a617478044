"""Approvals in a turn: which calls wait for a person, who may decide, and what a click does.

The rules are pure (`bot.policy`); this module applies them to one turn with the store behind it:
it screens each checked call (run at once, or hold back), writes the audit of every decision, and
turns a click into a decision or a short note saying why nothing changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.policy.approval import call_hash
from bot.policy.places import place_id
from bot.turn.calls import Screen
from bot.types import (
    ApprovalPrompt,
    AuditEntry,
    CallDecision,
    ConversationKey,
    Decision,
    Incoming,
    RememberedApproval,
    ToolCall,
    ToolSpec,
)

Clock = Callable[[], float]

NOT_YOURS = "Only the person who asked, or an admin, can decide on these calls."
ALREADY_DECIDED = "This call was already decided{by}; nothing changed."
EXPIRED = "This request has expired; nothing changed."
GONE = "This approval request no longer exists."
CHANGED = "This call is not the one that was shown for approval; nothing changed."


class ApprovalStore(Protocol):
    """What approvals need of the store (`bot.store.approvals.ApprovalLedger` fills it)."""

    async def remembered(self, place: str, server: str, tool: str) -> str | None: ...

    async def remember(self, place: str, server: str, tool: str, definition_hash: str, by: str) -> None: ...

    async def record_audit(self, key: ConversationKey, entries: Sequence[AuditEntry]) -> None: ...

    async def prompt(self, request_id: str) -> tuple[ApprovalPrompt, str] | None: ...

    async def decide(
        self, request_id: str, call_ids: Sequence[str], status: CallDecision, by: str, now: float
    ) -> list[str]: ...

    async def remembered_approvals(self, place: str | None = None) -> list[RememberedApproval]: ...


def new_request_id() -> str:
    """Short, unguessable, and safe inside Slack action values and Discord custom ids."""
    return secrets.token_urlsafe(12)


@dataclass(slots=True)
class TurnScreen:
    """Screens the calls of one turn and collects the audit of what ran without asking."""

    store: ApprovalStore
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


def screen_for(store: ApprovalStore, incoming: Incoming) -> tuple[Screen, TurnScreen]:
    screen = TurnScreen(store=store, incoming=incoming)
    return screen, screen


async def decide(
    store: ApprovalStore,
    *,
    request_id: str,
    user_id: str,
    approve: bool,
    admins: frozenset[str],
    now: float,
    call_id: str | None = None,
    shown_hash: str | None = None,
    remember: bool = False,
    definition_hash: Callable[[str, str], Awaitable[str | None]] | None = None,
) -> Decision:
    """Apply one click: the requester or an admin decides one call (`call_id`) or all that are open.

    A click by anyone else, on a decided, expired or vanished request, or on a call whose hash is not
    the one shown, changes nothing and says why. `remember` (approve only) also always-allows each
    approved tool in the request's place, bound to its current definition (`definition_hash`).
    """
    found = await store.prompt(request_id)
    if found is None:
        return Decision(changed=False, prompt=None, note=GONE)
    prompt, status = found
    if user_id != prompt.requester and user_id not in admins:
        return Decision(changed=False, prompt=prompt, note=NOT_YOURS)
    chosen = [c for c in prompt.calls if call_id is None or c.call_id == call_id]
    if status != "waiting":
        expired = any(c.status == "expired" for c in chosen)
        return Decision(
            changed=False, prompt=prompt, note=EXPIRED if expired else ALREADY_DECIDED.format(by="")
        )
    if call_id is not None and not chosen:
        return Decision(changed=False, prompt=prompt, note=GONE)
    if shown_hash is not None and any(c.call_hash != shown_hash for c in chosen):
        return Decision(changed=False, prompt=prompt, note=CHANGED)
    if prompt.expires_at <= now:
        return Decision(changed=False, prompt=prompt, note=EXPIRED)
    open_ids = [c.call_id for c in chosen if c.status == "pending"]
    if not open_ids:
        by = chosen[0].decided_by if len(chosen) == 1 else None
        # Every call decided but the turn never went on (a resume that failed): this click may resume it.
        return Decision(
            changed=False,
            prompt=prompt,
            note=ALREADY_DECIDED.format(by=f" by {by}" if by else ""),
            ready=not prompt.open,
        )
    status_now: CallDecision = "approved" if approve else "denied"
    changed = await store.decide(request_id, open_ids, status_now, user_id, now)
    if remember and approve and definition_hash is not None:
        for call in chosen:
            if call.call_id in changed:
                # Bound to the definition that was shown, and only while the tool still has it.
                current = await definition_hash(call.server, call.tool)
                if current is not None and current == call.definition_hash:
                    await store.remember(prompt.place, call.server, call.tool, current, user_id)
    refreshed = await store.prompt(request_id)
    after = refreshed[0] if refreshed else prompt
    if not changed:
        return Decision(changed=False, prompt=after, note=ALREADY_DECIDED.format(by=""))
    return Decision(changed=True, prompt=after, ready=not after.open, decided=tuple(changed))

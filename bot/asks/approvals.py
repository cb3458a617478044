"""Approvals: who may decide on a turn's waiting calls, and what a click does.

The rules are pure (`bot.policy`); the turn screens its calls (`bot.turn.screen`); this module turns
a click into a decision or a short note saying why nothing changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from bot.types import (
    ApprovalPrompt,
    AuditEntry,
    CallDecision,
    ConversationKey,
    Decision,
    RememberedApproval,
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
    """Short, unguessable, and safe inside the ids a platform's buttons carry back (short ASCII)."""
    return secrets.token_urlsafe(12)


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

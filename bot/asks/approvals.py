"""Approvals: who may decide on a turn's waiting calls, and what a click does.

The rules are pure (`bot.policy`); the turn screens its calls (`bot.turn.loop`); this module turns
a click into a decision or a short note saying why nothing changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from bot.store.approvals import ApprovalLedger
from bot.types import (
    CallDecision,
    Decision,
)

Clock = Callable[[], float]

NOT_YOURS = "Only the person who asked, or an admin, can decide on these calls."
ALREADY_DECIDED = "This call was already decided{by}; nothing changed."
EXPIRED = "This request has expired; nothing changed."
GONE = "This approval request no longer exists."
CHANGED = "This call is not the one that was shown for approval; nothing changed."


def new_request_id() -> str:
    """Short, unguessable, and safe inside the ids a platform's buttons carry back (short ASCII)."""
    return secrets.token_urlsafe(12)


async def decide(
    store: ApprovalLedger,
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

    Anything else changes nothing and says why; `remember` also always-allows each approved tool here."""
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

"""Tool calls waiting for a person's approval, the decisions on them, and what is remembered.

Its own module because the approval ledger, the policy and the front ends' cards share these,
apart from the other kinds of asks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from bot.types.conversation import ConversationKey

CallDecision = Literal["pending", "approved", "denied", "expired"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """One call waiting for a person, exactly as it will run if approved."""

    call_id: str
    server: str
    # The tool's name on its server (what the servers file and remembered approvals name).
    tool: str
    arguments: dict[str, Any]
    call_hash: str
    status: CallDecision = "pending"
    decided_by: str | None = None
    # The tool's definition when the call was shown: it runs only while the tool is still that.
    definition_hash: str = ""

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, indent=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPrompt:
    """What an approval message shows: the calls, why the model wants them, who may decide, until when."""

    request_id: str
    key: ConversationKey
    requester: str
    # The place "always allow here" applies to (`bot.policy.places.place_id`).
    place: str
    calls: tuple[PendingCall, ...]
    # What the model wrote next to its calls, if anything (often why it wants them).
    reason: str
    expires_at: float
    # Where the approval message was posted (platform-specific), so any process can update it.
    message_ref: str | None = None
    # Calls of the same round that wait for answers to their server's questions (not shown here).
    questions_open: bool = False

    @property
    def open(self) -> bool:
        """True while a call still waits for a decision, or for an answer to a question."""
        return self.questions_open or any(call.status == "pending" for call in self.calls)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One decision on a tool call: by a person (their id) or automatic ("auto: read-only", …)."""

    who: str
    place: str
    server: str
    tool: str
    call_id: str
    arguments_hash: str
    outcome: str
    at: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RememberedApproval:
    """An "always allow here": this tool in this place, while its definition keeps this hash."""

    place: str
    server: str
    tool: str
    definition_hash: str
    granted_by: str
    granted_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a click did: `note` (for the clicker only) says why nothing changed; `ready` means every
    call is decided and the turn can go on (`Agent.resume`)."""

    changed: bool
    prompt: ApprovalPrompt | None
    note: str | None = None
    ready: bool = False
    # The calls this click decided.
    decided: tuple[str, ...] = ()

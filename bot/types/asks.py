"""One `Ask` of any kind, the `Answer`s a person gives to it, and an approval's own values.

The one shape every ask is announced and answered in (`Agent.answer`), whatever the kind; the
approval ledger, the policy and the front ends' cards share the tool calls waiting for approval,
the decisions on them, and what is remembered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.types.conversation import ConversationKey
from bot.types.inputs import InputOutcome, InputRequest
from bot.types.tools import SignInNeeded

CallDecision = Literal["pending", "approved", "denied", "expired"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSummary:
    """A built-in call asked as the question it is (a schedule to confirm): the core writes it once,
    when the call is parked, so every front end and every process shows the same card."""

    icon: str
    headline: str
    # Plain text, one fact a line (what, where, when); a front end escapes it.
    text: str
    yes: str = "Confirm"
    no: str = "Cancel"

    def to_json(self) -> dict[str, str]:
        return {
            "icon": self.icon,
            "headline": self.headline,
            "text": self.text,
            "yes": self.yes,
            "no": self.no,
        }

    @classmethod
    def from_json(cls, value: Any) -> CallSummary | None:
        if not isinstance(value, dict):
            return None
        return cls(**{k: str(value[k]) for k in ("icon", "headline", "text", "yes", "no") if k in value})


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A built-in call to hold for its person's confirmation: the arguments it runs with if approved
    (checked, and pinned as shown), and its card."""

    arguments: dict[str, Any]
    summary: CallSummary


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
    # How its card reads, for a built-in call the core describes (None: the call and its arguments).
    summary: CallSummary | None = None

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, indent=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPrompt:
    """What an approval message shows: the calls, why the model wants them, who may decide, until when."""

    request_id: str
    key: ConversationKey
    requester: str
    # The place "always allow here" applies to (`bot.policy.scopes.place_id`).
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


AskKind = Literal["approval", "question", "link", "sign_in"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """Something the core asks a person, answered with `Agent.answer(ask.id, person, answer)`: `id` is the
    kind's own request id (a sign-in's state), `person` who may answer (admins too, for an approval); one
    of `approval`, `input`, `sign_in` is set."""

    kind: AskKind
    id: str
    key: ConversationKey
    person: str
    expires_at: float
    approval: ApprovalPrompt | None = None
    input: InputRequest | None = None
    sign_in: SignInNeeded | None = None

    @classmethod
    def of_approval(cls, prompt: ApprovalPrompt) -> Ask:
        return cls(
            kind="approval",
            id=prompt.request_id,
            key=prompt.key,
            person=prompt.requester,
            expires_at=prompt.expires_at,
            approval=prompt,
        )

    @classmethod
    def of_input(cls, request: InputRequest) -> Ask:
        return cls(
            kind="link" if request.mode == "url" else "question",
            id=request.request_id,
            key=request.key,
            person=request.user_id,
            expires_at=request.expires_at,
            input=request,
        )

    @classmethod
    def of_sign_in(cls, sign_in: SignInNeeded, key: ConversationKey, expires_at: float) -> Ask:
        return cls(
            kind="sign_in",
            id=sign_in.state,
            key=key,
            person=sign_in.person,
            expires_at=expires_at,
            sign_in=sign_in,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Approve:
    """Run the call `call_id` (every open one when None), as shown (`shown_hash`); `remember`
    also always allows its tool in the request's place."""

    call_id: str | None = None
    shown_hash: str | None = None
    remember: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Deny:
    """Do not run the call `call_id` (every open one when None)."""

    call_id: str | None = None
    shown_hash: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Submit:
    """A question's form filled in (checked against the form; a wrong field keeps it open)."""

    values: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkOpened:
    """The person opened a link they were asked to and did what it was for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decline:
    """The person said no to a question or a link."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """The person dismissed a question or a link without answering."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignInFinished:
    """The browser came back from a sign-in with what the server's sign-in service said."""

    code: str | None = None
    iss: str | None = None
    error: str | None = None


Answer = Approve | Deny | Submit | LinkOpened | Decline | Cancel | SignInFinished


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedIn:
    """Who a finished sign-in connected to which server."""

    server: str
    person: str
    # Parked turns whose calls waited for this sign-in: resume them.
    request_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """What an answer did: `note` (for the answerer only) why nothing changed, `errors` per field of
    a form refused as filled in, `resume` the parked turns it let go on (`Agent.resume`), and the
    kind's own outcome (`decision`, `input`, `signed_in`) for front ends that show more of it."""

    changed: bool
    note: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    resume: tuple[str, ...] = ()
    decision: Decision | None = None
    input: InputOutcome | None = None
    signed_in: SignedIn | None = None

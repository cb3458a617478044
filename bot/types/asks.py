"""One `Ask` of any kind, and the `Answer`s a person gives to it.

Its own module because this is the one shape every ask is announced and answered in
(`Agent.answer`), whatever the kind's own values (approvals, questions, sign-ins) are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bot.types.approvals import ApprovalPrompt, Decision
from bot.types.conversation import ConversationKey
from bot.types.inputs import InputOutcome, InputRequest
from bot.types.tools import SignInNeeded

AskKind = Literal["approval", "question", "link", "sign_in"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """Something the core asks a person, of any kind, in one shape, answered with
    `Agent.answer(ask.id, person, answer)`. `id` is the kind's own request id (a sign-in's state);
    `person` who may answer (admins too, for an approval); one of `approval`, `input`, `sign_in` is set.
    """

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

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
    """Something the core asks a person, of any kind, in one shape: front ends show it, and answer
    it with `Agent.answer(ask.id, person, answer)` whatever it is.

    `id` is the kind's own request id (an approval's request, a question's or link's request, a
    sign-in's single-use state); `person` is who may answer (for an approval, admins may too).
    Exactly one of `approval`, `input` (a question or a link) and `sign_in` is the payload.
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
    """What an answer did. `note` says, for the person who answered only, why nothing changed;
    `errors` holds a message per field of a form refused as filled in (the form stays open);
    `resume` names the parked turn this answer let go on (the front end calls `Agent.resume`).
    `decision` and `input` are the kind's own outcome, for front ends that show more of it;
    `signed_in` is a finished sign-in (the terminal and the browser name its server)."""

    changed: bool
    note: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    resume: tuple[str, ...] = ()
    decision: Decision | None = None
    input: InputOutcome | None = None
    signed_in: SignedIn | None = None

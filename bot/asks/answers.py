"""One way to answer anything the core asked a person (`Agent.answer`).

Each kind of ask keeps its own ledger and rules; this routes an answer by its kind and speaks for all
in one outcome (`Answered`), so a front end answers and resumes every ask the same way. An ask gone or
expired is an `AskError` with a message for the person.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Literal

from bot.asks import approvals, inputs
from bot.asks.connections import Connections
from bot.asks.inputs import InputDesk
from bot.asks.parking import Parking
from bot.errors import AskError, AskExpired, AskGone, SignInFailed
from bot.types import (
    Answer,
    Answered,
    Approve,
    Cancel,
    Decline,
    Deny,
    InputAnswer,
    LinkOpened,
    SignInFinished,
    Submit,
)

NO_QUESTIONS = "Questions from tools are not enabled."
NO_SIGN_INS = "No server here asks people to sign in with their own account."
_ACTIONS: dict[type, Literal["decline", "cancel"]] = {Decline: "decline", Cancel: "cancel"}


@dataclass(eq=False)
class Answers:
    """Takes a person's answer to any ask and hands it to the ledger of its kind."""

    _: KW_ONLY
    parking: Parking
    inputs: InputDesk | None
    connections: Connections | None

    async def answer(self, ask_id: str, person: str, answer: Answer) -> Answered:
        """Apply `answer` from `person` to the ask `ask_id`; `AskError` when it is gone or expired."""
        match answer:
            case Approve() | Deny():
                return await self._decide(ask_id, person, answer)
            case Submit() | LinkOpened() | Decline() | Cancel():
                return await self._reply(ask_id, person, answer)
            case SignInFinished():
                return await self._signed_in(ask_id, answer)

    async def _decide(self, ask_id: str, person: str, answer: Approve | Deny) -> Answered:
        remember = isinstance(answer, Approve) and answer.remember
        decision = await self.parking.decide(
            ask_id,
            person,
            approve=isinstance(answer, Approve),
            call_id=answer.call_id,
            shown_hash=answer.shown_hash,
            remember=remember,
        )
        if decision.note == approvals.GONE:
            raise AskGone(decision.note)
        if decision.note == approvals.EXPIRED:
            raise AskExpired(decision.note)
        return Answered(
            changed=decision.changed,
            note=decision.note,
            resume=(ask_id,) if decision.ready else (),
            decision=decision,
        )

    async def _reply(
        self, ask_id: str, person: str, answer: Submit | LinkOpened | Decline | Cancel
    ) -> Answered:
        if self.inputs is None:
            raise AskGone(NO_QUESTIONS)
        outcome = await self.inputs.answer(ask_id, person, _input_answer(answer))
        if outcome.note == inputs.GONE:
            raise AskGone(outcome.note, request=outcome.request)
        if outcome.note == inputs.EXPIRED:
            raise AskExpired(outcome.note, request=outcome.request)
        return Answered(
            changed=outcome.changed,
            note=outcome.note,
            errors=outcome.errors,
            resume=(outcome.resume,) if outcome.resume is not None else (),
            input=outcome,
        )

    async def _signed_in(self, ask_id: str, answer: SignInFinished) -> Answered:
        # The sign-in's single-use state was bound to its person when it was started, so the
        # browser that brings it back signs in that person and no one else.
        if self.connections is None:
            raise AskGone(NO_SIGN_INS)
        try:
            signed = await self.connections.finish(ask_id, answer.code, answer.iss, answer.error)
        except SignInFailed as exc:  # refused, already used or expired: the person gets a new link
            raise AskError(exc.message) from exc
        return Answered(changed=True, resume=signed.request_ids, signed_in=signed)


def _input_answer(answer: Submit | LinkOpened | Decline | Cancel) -> InputAnswer:
    if isinstance(answer, Submit):
        return InputAnswer(action="accept", content=answer.values)
    return InputAnswer(action="accept" if isinstance(answer, LinkOpened) else _ACTIONS[type(answer)])

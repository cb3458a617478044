"""One way for a front end to answer any ask, and to show it again: an approval, a server's question,
a sign-in.

Each kind has its own ledger (`bot.asks.parking`, `bot.asks.inputs`, `bot.asks.connections`); the front
ends should not need to know which, nor how each reports an answer that came too late, so this turns
every kind's outcome into one `Answered` and every late answer into an `AskError`.
"""

from __future__ import annotations

from bot.asks import inputs as _inputs
from bot.asks import parking as _parking
from bot.asks.connections import Connections
from bot.asks.inputs import InputDesk
from bot.asks.parking import Parking
from bot.errors import AskError, AskExpired, AskGone, SignInFailed
from bot.store.approvals import ApprovalLedger
from bot.types import (
    Answer,
    Answered,
    ApprovalPrompt,
    Approve,
    Ask,
    Cancel,
    ConversationKey,
    Decline,
    Deny,
    InputAction,
    InputAnswer,
    InputOutcome,
    InputRequest,
    SignInFinished,
    Submit,
)

NO_QUESTIONS = "Questions from tools are not enabled."
NO_SIGN_INS = "No server here asks people to sign in with their own account."
_ACTIONS: dict[type, InputAction] = {Decline: "decline", Cancel: "cancel"}


def _refuse_late(note: str | None, gone: str, expired: str, request: InputRequest | None = None) -> None:
    """An ask that is gone or expired is an `AskError` to the front end, whatever its kind."""
    if note == gone:
        raise AskGone(gone, request=request)
    if note == expired:
        raise AskExpired(expired, request=request)


class Answering:
    """The asks of one nerve: approvals need a ledger, questions a desk, sign-ins connections; an ask of
    a kind not enabled here is gone."""

    def __init__(
        self,
        parking: Parking,
        approvals: ApprovalLedger | None,
        inputs: InputDesk | None,
        connections: Connections | None,
    ) -> None:
        self._parking = parking
        self._approvals = approvals
        self._inputs = inputs
        self._connections = connections

    async def answer(self, ask_id: str, person: str, answer: Answer) -> Answered:
        """Apply `answer` from `person` to the ask `ask_id`; `AskError` when it is gone or expired."""
        if isinstance(answer, Approve | Deny):
            decision = await self._parking.decide(ask_id, person, answer)
            _refuse_late(decision.note, _parking.GONE, _parking.EXPIRED)
            resume = (ask_id,) if decision.ready else ()
            return Answered(changed=decision.changed, note=decision.note, resume=resume, decision=decision)
        if isinstance(answer, SignInFinished):
            # The sign-in's single-use state was bound to its person when it was started, so the
            # browser that brings it back signs in that person and no one else.
            if self._connections is None:
                raise AskGone(NO_SIGN_INS)
            try:
                signed = await self._connections.sign_ins.complete(
                    ask_id, answer.code, answer.iss, answer.error
                )
            except SignInFailed as exc:  # refused, already used or expired: the person gets a new link
                raise AskError(exc.message) from exc
            return Answered(changed=True, resume=signed.request_ids, signed_in=signed)
        if self._inputs is None:
            raise AskGone(NO_QUESTIONS)
        content = answer.values if isinstance(answer, Submit) else None
        reply = InputAnswer(action=_ACTIONS.get(type(answer), "accept"), content=content)
        outcome = await self._inputs.answer(ask_id, person, reply)
        _refuse_late(outcome.note, _inputs.GONE, _inputs.EXPIRED, outcome.request)
        return Answered(
            changed=outcome.changed,
            note=outcome.note,
            errors=outcome.errors,
            resume=(outcome.resume,) if outcome.resume is not None else (),
            input=outcome,
        )

    async def open_input(self, request_id: str, user_id: str) -> InputOutcome:
        """A click on a server's question: the request when this person may answer it now, or why not."""
        if self._inputs is None:
            return InputOutcome(changed=False, request=None, note=NO_QUESTIONS)
        return await self._inputs.open(request_id, user_id)

    async def posted(self, ask: Ask, ref: str) -> None:
        """Remember where an ask was shown, for whichever process redraws it (sign-ins are never redrawn)."""
        if ask.approval is not None and self._approvals is not None:
            await self._approvals.set_message_ref(ask.id, ref)
        elif ask.input is not None and self._inputs is not None:
            await self._inputs.store.set_input_message_ref(ask.id, ref)

    async def parked_questions(self, request_id: str) -> list[InputRequest]:
        """The open questions a parked turn waits on, for a front end that stopped to ask again."""
        if self._inputs is None:
            return []
        return await self._inputs.store.open_parked_questions(request_id)

    async def parked_in(self, key: ConversationKey) -> tuple[ApprovalPrompt, str] | None:
        """The turn this thread is parked on, with its status, for a front end without an ask in hand."""
        if self._approvals is None or (request_id := await self._approvals.waiting_in(key)) is None:
            return None
        return await self.parked(request_id)

    async def parked(self, request_id: str) -> tuple[ApprovalPrompt, str] | None:
        return await self._approvals.prompt(request_id) if self._approvals is not None else None

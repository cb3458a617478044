"""Asking people what a server needs mid-call (MCP elicitation), and taking their answers.

The question lives in the store, so the answer may come through any process. Only the person who
started the turn may answer; a form asking for a secret, or a link not https, is never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bot.forms import FormError, check_answer, form_from_schema, secret_fields
from bot.observe import metrics
from bot.plain_http import is_loopback
from bot.store.inputs import InputLedger, ParkedCallQuestions, ParkedQuestion, StoredInput
from bot.turn.calls import Waiting
from bot.turn.deadline import finish_anyway
from bot.types import (
    Ask,
    Incoming,
    InputAnswer,
    InputDraft,
    InputMode,
    InputNeeded,
    InputOutcome,
    InputRequest,
    InputResume,
    InputStatus,
    Progress,
    TurnEvent,
)

logger = logging.getLogger(__name__)

Clock = Callable[[], float]

# The waiter marks its requests alive this often; one not marked for STALE_AFTER has no waiter.
ALIVE_EVERY = 2.0
# A waiter looks at the store this often for an answer given in another process.
POLL_SECONDS = 0.5
STALE_AFTER = 15.0
MAX_OPEN_LINKS = 1000

NOT_YOURS = "Only the person whose message started this can answer it."
GONE = "This request no longer exists."
ENDED = "This request ended when nerve restarted before it was answered. Ask again to run it."
EXPIRED = "This request expired before it was answered; the tool was told it was cancelled."
SETTLED = {
    "accepted": "This was already answered.",
    "declined": "This was already declined.",
    "cancelled": "This was cancelled.",
    "expired": EXPIRED,
    "ended": ENDED,
    "completed": "This was already done.",
}
_STATUS_OF = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}


@dataclass(eq=False)
class InputDesk:
    """Shows servers' questions to the right person and hands their answers back to the calls."""

    store: InputLedger
    _: KW_ONLY
    clock: Clock
    timeout: float
    # Aliveness is about processes, so it runs on the wall clock even when tests move `clock`.
    wall: Callable[[], float] = time.time
    _answered: dict[str, asyncio.Event] = field(default_factory=dict, init=False)
    # Links people agreed to open, until their server says it is done with them (bounded).
    _links: dict[tuple[str, str], tuple[InputRequest, Progress]] = field(default_factory=dict, init=False)

    async def ask(
        self, incoming: Incoming, server: str, draft: InputDraft, progress: Progress
    ) -> InputAnswer:
        """Show the question to the turn's person and wait for their answer, its expiry, or cancellation."""
        request, schema = self._request(incoming, server, draft)
        await self.store.open_input(request, schema, self.wall())
        if request.refused is not None:
            logger.info("MCP server %r asked for input nerve refused to show: %s", server, request.refused)
            metrics.question_ended("refused")
            await progress(TurnEvent(kind="ask", message=request.refused, ask=Ask.of_input(request)))
            return InputAnswer(action="decline")
        metrics.question_waiting(request)
        await progress(TurnEvent(kind="ask", message=request.message, ask=Ask.of_input(request)))
        status: InputStatus = "cancelled"
        try:
            status, answer = await self._wait(request)
            if status == "accepted" and draft.mode == "url" and draft.elicitation_id:
                self._links[(server, draft.elicitation_id)] = (request, progress)
                while len(self._links) > MAX_OPEN_LINKS:
                    self._links.pop(next(iter(self._links)))
            return answer
        finally:
            metrics.question_ended(status, request.request_id)
            if status == "cancelled":
                # The call ended first (its timeout, the turn stopped): nobody should answer any more.
                await finish_anyway(self.store.settle_input(request.request_id, "cancelled", by="nerve"))
            with contextlib.suppress(Exception):
                await asyncio.shield(progress(ended(request, status)))

    async def _wait(self, request: InputRequest) -> tuple[InputStatus, InputAnswer]:
        request_id = request.request_id
        answered = self._answered.setdefault(request_id, asyncio.Event())
        alive_at = self.wall()
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_SECONDS):
                        await answered.wait()
                stored = await self.store.stored_input(request_id)
                if stored is None:
                    return "cancelled", InputAnswer(action="cancel")
                if stored.status != "open":
                    return stored.status, _answer(stored.status, stored.request.mode, stored.content)
                if self.clock() >= request.expires_at:
                    if await self.store.settle_input(request_id, "expired", by="expiry"):
                        return "expired", InputAnswer(action="cancel")
                    continue  # answered at the same moment: read it
                if self.wall() - alive_at >= ALIVE_EVERY:
                    alive_at = self.wall()
                    await self.store.keep_inputs_alive([request_id], alive_at)
        finally:
            self._answered.pop(request_id, None)

    def _request(
        self, incoming: Incoming, server: str, draft: InputDraft, expires_at: float | None = None
    ) -> tuple[InputRequest, dict[str, Any] | None]:
        refused: str | None = None
        form = None
        if draft.mode == "url":
            refused = unsafe_link(draft.url or "")
        else:
            schema = draft.schema or {}
            secrets = secret_fields(schema)
            if secrets:
                refused = (
                    f"{server} asked for a secret ({', '.join(secrets)}) in a chat form. nerve never "
                    "collects passwords, tokens or keys that way, so it declined; "
                    "the tool may offer a sign-in link instead."
                )
            else:
                try:
                    form = form_from_schema(schema)
                except FormError as exc:
                    refused = f"{server} asked for input nerve cannot show as a form ({exc}), so it declined."
        request = InputRequest(
            request_id=new_request_id(),
            key=incoming.key,
            user_id=incoming.user_id,
            server=server,
            tools=draft.tools,
            message=draft.message,
            mode=draft.mode,
            form=form,
            url=draft.url if draft.mode == "url" and refused is None else None,
            refused=refused,
            expires_at=self.clock() + self.timeout if expires_at is None else expires_at,
        )
        return request, draft.schema

    def park_questions(
        self, incoming: Incoming, waiting: Waiting, needed: InputNeeded, expires_at: float
    ) -> ParkedCallQuestions:
        """A parked call's questions as they will be shown (each checked as a live one is)."""
        questions = []
        for input_key, draft in needed.questions:
            request, schema = self._request(incoming, waiting.spec.server, draft, expires_at)
            questions.append(ParkedQuestion(request=request, schema=schema, key=input_key))
        return ParkedCallQuestions(
            call_id=waiting.call.id, request_state=needed.request_state, questions=tuple(questions)
        )

    async def answers_for(self, parked_id: str, call_id: str, progress: Progress) -> InputResume | None:
        """What to make a parked call again with (None: it asked nothing); `progress` hears the ends."""
        found = await self.store.parked_answers(parked_id, call_id)
        if found is None:
            return None
        for request in await self.store.close_parked_questions(parked_id, call_id):
            metrics.question_settled(request.request_id)
            with contextlib.suppress(Exception):
                await progress(ended(request, "expired"))
        found = await self.store.parked_answers(parked_id, call_id)
        assert found is not None
        request_state, rows = found
        for _, status, _, _ in rows:
            metrics.question_ended(status)
        answers = tuple((key, _answer(status, mode, content)) for key, status, mode, content in rows)
        return InputResume(request_state=request_state, answers=answers)

    async def completed(self, server: str, elicitation_id: str) -> None:
        """The server finished what a link was for: the request's message says so."""
        found = self._links.pop((server, elicitation_id), None)
        if found is None:
            return
        request, progress = found
        with contextlib.suppress(Exception):
            await progress(ended(request, "completed"))

    async def open(self, request_id: str, user_id: str) -> InputOutcome:
        """A click on "Fill in": the request when this person may answer it now, else a note why not."""
        stored, note = await self._answerable(request_id, user_id)
        request = stored.request if stored else None
        return InputOutcome(changed=False, request=request, note=note, status=None if note else "open")

    async def answer(self, request_id: str, user_id: str, answer: InputAnswer) -> InputOutcome:
        """A submitted form, a decline or a dismissal; an invalid or late one changes nothing, saying why."""
        stored, note = await self._answerable(request_id, user_id)
        if note is not None or stored is None:
            return InputOutcome(changed=False, request=stored.request if stored else None, note=note)
        request = stored.request
        content: dict[str, Any] | None = None
        if answer.action == "accept" and request.mode == "form" and request.form is not None:
            checked, errors = check_answer(request.form, answer.content or {})
            if checked is None:
                return InputOutcome(changed=False, request=request, status="open", errors=errors)
            content = checked
        status: InputStatus = _STATUS_OF[answer.action]  # type: ignore[assignment]
        if not await self.store.settle_input(request_id, status, by=user_id, content=content):
            again = await self.store.stored_input(request_id)
            settled = again.status if again is not None else "cancelled"
            return InputOutcome(
                changed=False, request=request, status=settled, note=SETTLED.get(settled, GONE)
            )
        self._wake(request_id)
        metrics.question_settled(request_id)
        resume = None
        parked_call = stored.parked_id is not None and stored.call_id is not None
        if parked_call and await self.store.settle_parked_call(stored.parked_id, stored.call_id, by=user_id):  # type: ignore[arg-type]
            resume = stored.parked_id
        return InputOutcome(changed=True, request=request, status=status, resume=resume)

    async def _answerable(self, request_id: str, user_id: str) -> tuple[StoredInput | None, str | None]:
        stored = await self.store.stored_input(request_id)
        if stored is None:
            return None, GONE
        if user_id != stored.request.user_id:
            return stored, NOT_YOURS
        if stored.status != "open":
            return stored, SETTLED.get(stored.status, GONE)
        if self.clock() >= stored.request.expires_at:
            await self.store.settle_input(request_id, "expired", by="expiry")
            self._wake(request_id)
            return stored, EXPIRED
        if (
            stored.parked_id is None
            and request_id not in self._answered
            and await self.store.settle_input(
                request_id, "ended", by="nerve", stale_before=self.wall() - STALE_AFTER
            )
        ):
            return stored, ENDED
        return stored, None

    def _wake(self, request_id: str) -> None:
        if (waiting := self._answered.get(request_id)) is not None:
            waiting.set()


def new_request_id() -> str:
    """Short, unguessable, and safe inside the ids a platform's buttons carry back (short ASCII)."""
    return secrets.token_urlsafe(12)


def ended(request: InputRequest, status: InputStatus) -> TurnEvent:
    """The event that says how a question or a link ended, so front ends take its buttons off."""
    return TurnEvent(kind="ask_done", message=status, ask=Ask.of_input(request))


def _answer(status: InputStatus, mode: InputMode, content: dict[str, Any] | None) -> InputAnswer:
    """What the server is told of a question that ended so (a form's content only when accepted)."""
    if status in ("accepted", "completed"):
        return InputAnswer(
            action="accept", content=content if status == "accepted" and mode == "form" else None
        )
    return InputAnswer(action="decline" if status == "declined" else "cancel")


def unsafe_link(url: str) -> str | None:
    """Why a link a server wants people to open is not shown, or None: https only (http on loopback)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if (parts.scheme == "https" and host) or (parts.scheme == "http" and is_loopback(host)):
        return None
    shown = url[:200]
    return f"The server asked to open a link nerve does not show (only https links are allowed): {shown}"

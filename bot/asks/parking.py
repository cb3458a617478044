"""Turns that wait for people: parking a round whose calls need approval, deciding, and resuming.

A waiting turn holds nothing: its round is written to the store and its task ends, so a decision may
arrive in any process, after a restart too; `resume` claims the turn there and goes on with the loop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.asks.decided import NERVE, NO_ONE_TO_ASK, run_decided, state_so_far, stopped
from bot.asks.inputs import Clock, InputDesk, new_request_id
from bot.errors import LLMError, TurnOverdue
from bot.memory.tools import MEMORY_SERVER
from bot.observe import metrics
from bot.observe.log_context import turn_context
from bot.observe.tracing import turn_span
from bot.policy.approval import call_hash
from bot.policy.scopes import place_id
from bot.schedules.tools import SCHEDULES_SERVER
from bot.seams import TurnLock
from bot.store.approvals import ApprovalLedger, ParkedTurn
from bot.store.sign_ins import SignInWait
from bot.turn.calls import CallOutcome, Waiting
from bot.turn.deadline import TurnDeadline, finish_anyway
from bot.turn.loop import TurnLoop, WaitingRound
from bot.types import (
    AgentReply,
    ApprovalPrompt,
    Approve,
    Ask,
    AuditEntry,
    CallDecision,
    ConversationKey,
    Decision,
    Deny,
    Incoming,
    PendingCall,
    Progress,
    TurnEvent,
    Usage,
    no_progress,
)

# What a click on an approval is told when it changes nothing (`Parking.decide`).
NOT_YOURS = "Only the person who asked, or an admin, can decide on these calls."
NOT_YOURS_TO_REMEMBER = "Only the person who asked decides what is remembered for them."
NOT_YOURS_TO_SCHEDULE = "Only the person who asked confirms what is scheduled to run as them."
# The built-ins whose calls only their requester decides, an admin neither: what is remembered
# about a person, and what runs later as them; and what each refusal says.
REQUESTERS_OWN = {MEMORY_SERVER: NOT_YOURS_TO_REMEMBER, SCHEDULES_SERVER: NOT_YOURS_TO_SCHEDULE}
ALREADY_DECIDED = "This call was already decided{by}; nothing changed."
EXPIRED = "This request has expired; nothing changed."
GONE = "This approval request no longer exists."
CHANGED = "This call is not the one that was shown for approval; nothing changed."


@dataclass(eq=False, kw_only=True)
class Parking:
    """Parks rounds that wait for people, applies their decisions, and resumes the turns."""

    loop: TurnLoop
    locks: TurnLock

    clock: Clock
    approvals: ApprovalLedger | None = None
    inputs: InputDesk | None = None

    async def settle(self, result: AgentReply | WaitingRound, progress: Progress) -> AgentReply:
        """The turn's answer, or what it waits for (a decision, an answer, a sign-in) once its round is
        written: nothing is held meanwhile."""
        if not isinstance(result, WaitingRound):
            return result
        assert self.approvals is not None
        incoming, state = result.incoming, result.state
        done = [r for r in result.results if isinstance(r, CallOutcome)]
        waiting = [r for r in result.results if isinstance(r, Waiting)]
        request_id = new_request_id()
        asked = [(w, w.questions) for w in waiting if w.questions is not None]
        signing = [(w, w.sign_in) for w in waiting if w.sign_in is not None]
        config = self.loop.config
        expires_at = self.clock() + max(
            config.approval_timeout,
            config.input_timeout if asked else 0,
            config.sign_in_timeout if signing else 0,
        )
        questions = [self._desk().park_questions(incoming, w, needed, expires_at) for w, needed in asked]
        calls = [
            (
                PendingCall(
                    call_id=w.call.id,
                    server=w.spec.server,
                    tool=w.spec.original_name,
                    arguments=w.arguments,
                    call_hash=call_hash(w.spec.server, w.spec.original_name, w.arguments),
                    summary=w.summary,
                ),
                w.spec.definition_hash,
            )
            for w in waiting
        ]
        await self.approvals.park(
            request_id=request_id,
            incoming=incoming,
            answer=result.answer,
            done=[o.message for o in done],
            calls=calls,
            rounds_used=result.rounds_used,
            expires_at=expires_at,
            questions=questions,
            sign_ins=[SignInWait(call_id=w.call.id, server=s.server, person=s.person) for w, s in signing],
            now=time.time(),
        )
        waiting_for: list[Ask] = []
        for w, sign_in in signing:
            waiting_for.append(ask := Ask.of_sign_in(sign_in, incoming.key, expires_at))
            message = f"Connect {w.spec.server} to go on"
            await progress(
                TurnEvent(kind="ask", message=message, tool=w.call.name, tool_call_id=w.call.id, ask=ask)
            )
        for parked_call in questions:
            for question in parked_call.questions:
                shown, ask = question.request, Ask.of_input(question.request)
                metrics.question_waiting(shown)
                await progress(TurnEvent(kind="ask", message=shown.refused or shown.message, ask=ask))
                if shown.refused is None:
                    waiting_for.append(ask)
        ready = False
        for parked_call in questions:
            if all(q.request.refused is not None for q in parked_call.questions):
                # Nothing to ask (every question refused): the call goes on at once with "decline".
                ready = await self._desk().store.settle_parked_call(request_id, parked_call.call_id, by=NERVE)
        if ready:
            return await self.resume(request_id, progress, held=True) or AgentReply(text="")
        found = await self.approvals.prompt(request_id)
        assert found is not None
        prompt = found[0]
        metrics.approval_parked(prompt)
        metrics.turn_outcome("parked")
        parts = [_waiting_for_approval(prompt)] if prompt.calls else []
        if asked:
            parts.append(
                f"Waiting for your answer to what {_listed(w.spec.original_name for w, _ in asked)} asked."
            )
        if signing:
            parts.append(
                f"{_listed(w.spec.server for w, _ in signing)} works with your own account: use the private"
                " Connect button I sent you to sign in, and I will go on."
            )
        if prompt.calls:
            waiting_for.insert(0, Ask.of_approval(prompt))
            await progress(TurnEvent(kind="ask", message=parts[0], ask=waiting_for[0]))
        attachments = (*state.attachments, *(o.attachment for o in done))
        return AgentReply(
            text=" ".join(parts), attachments=attachments, usage=result.usage, waiting=tuple(waiting_for)
        )

    def _desk(self) -> InputDesk:
        if self.inputs is None:
            raise RuntimeError("a call parked for questions needs the input desk")
        return self.inputs

    async def parked_by(self, incoming: Incoming) -> AgentReply | None:
        """The message a parked turn waits on, delivered again (a replay): its own request once more."""
        if self.approvals is None or not incoming.event_id:
            return None
        request_id = await self.approvals.parked_by(incoming.key, incoming.event_id)
        found = await self.approvals.prompt(request_id) if request_id is not None else None
        if found is None:
            return None
        prompt = found[0]
        if prompt.calls:
            return AgentReply(text=_waiting_for_approval(prompt), waiting=(Ask.of_approval(prompt),))

        if await self.approvals.sign_in_waits(prompt.request_id):
            return AgentReply(text="Waiting for you to sign in with the Connect button I sent you.")
        questions = await self.inputs.store.open_parked_questions(prompt.request_id) if self.inputs else []
        return AgentReply(
            text="Waiting for your answer to a tool's question.",
            waiting=tuple(Ask.of_input(q) for q in questions),
        )

    async def decide(self, request_id: str, user_id: str, answer: Approve | Deny) -> Decision:
        """A person's click: the requester or an admin decides one call (`call_id`) or all open ones (with
        `remember`, always allowed here from now on); anything else changes nothing and says why."""
        approve, call_id, shown_hash = isinstance(answer, Approve), answer.call_id, answer.shown_hash
        remember = isinstance(answer, Approve) and answer.remember
        if self.approvals is None:
            return Decision(changed=False, prompt=None, note="Approvals are not enabled.")
        now = self.clock()
        found = await self.approvals.prompt(request_id)
        if found is None:
            return Decision(changed=False, prompt=None, note=GONE)
        prompt, status = found
        chosen = [c for c in prompt.calls if call_id is None or c.call_id == call_id]
        # What is remembered for a person (or their place), or runs later as them, is theirs to allow:
        # anyone else is told so, not that an admin could.
        owned = [REQUESTERS_OWN[c.server] for c in chosen if c.server in REQUESTERS_OWN]
        if user_id != prompt.requester and owned:
            return Decision(changed=False, prompt=prompt, note=owned[0])
        if user_id != prompt.requester and user_id not in self.loop.config.admins:
            return Decision(changed=False, prompt=prompt, note=NOT_YOURS)
        if status != "waiting":
            note = EXPIRED if any(c.status == "expired" for c in chosen) else ALREADY_DECIDED.format(by="")
            return Decision(changed=False, prompt=prompt, note=note)
        if call_id is not None and not chosen:
            return Decision(changed=False, prompt=prompt, note=GONE)
        if shown_hash is not None and any(c.call_hash != shown_hash for c in chosen):
            return Decision(changed=False, prompt=prompt, note=CHANGED)
        if prompt.expires_at <= now:
            return Decision(changed=False, prompt=prompt, note=EXPIRED)
        open_ids = [c.call_id for c in chosen if c.status == "pending"]
        if not open_ids:
            by = chosen[0].decided_by if len(chosen) == 1 else None
            note = ALREADY_DECIDED.format(by=f" by {by}" if by else "")
            # Every call decided but the turn never went on (a resume that failed): this click may resume it.
            return Decision(changed=False, prompt=prompt, note=note, ready=not prompt.open)
        status_now: CallDecision = "approved" if approve else "denied"
        changed = await self.approvals.decide(request_id, open_ids, status_now, user_id, now)
        if remember:
            # Bound to the definition that was shown, and only while the tool still has it.
            now_defined = {
                (t.server, t.original_name): t.definition_hash for t in self.loop.host.list_tools()
            }
            for call in chosen:
                current = now_defined.get((call.server, call.tool))
                # A call asked as a question (a schedule to confirm) is asked every time.
                if call.summary is not None:
                    continue
                if call.call_id in changed and current == call.definition_hash:
                    await self.approvals.remember(prompt.place, call.server, call.tool, current, user_id)
        refreshed = await self.approvals.prompt(request_id)
        after = refreshed[0] if refreshed else prompt
        if not changed:
            return Decision(changed=False, prompt=after, note=ALREADY_DECIDED.format(by=""))
        metrics.approvals_decided(len(changed), approve)
        outcome = "approved, always allowed here" if remember else status_now
        decided = [c for c in after.calls if c.call_id in changed]
        await self._audit(after.key, after.place, decided, user_id, outcome)
        return Decision(changed=True, prompt=after, ready=not after.open)

    async def _audit(
        self, key: ConversationKey, place: str, calls: Sequence[PendingCall], who: str, outcome: str
    ) -> None:
        assert self.approvals is not None
        entries = [
            AuditEntry(
                who=who,
                place=place,
                server=c.server,
                tool=c.tool,
                call_id=c.call_id,
                arguments_hash=c.call_hash,
                outcome=outcome,
            )
            for c in calls
        ]
        await self.approvals.record_audit(key, entries)

    async def deny_unasked(self, request_id: str) -> list[str]:
        """Deny the open calls of a request nobody can be asked about, as nerve's decision, not a person's."""
        if self.approvals is None:
            return []
        found = await self.approvals.prompt(request_id)
        if found is None:
            return []
        prompt = found[0]
        open_ids = [c.call_id for c in prompt.calls if c.status == "pending"]
        denied = await self.approvals.decide(request_id, open_ids, "denied", NERVE, self.clock())
        if denied:
            metrics.approvals_decided(len(denied), False)
            decided = [c for c in prompt.calls if c.call_id in denied]
            await self._audit(prompt.key, prompt.place, decided, NERVE, f"denied: {NO_ONE_TO_ASK}")
        return denied

    async def expire_due(self, platform: str | None = None) -> list[str]:
        """Requests to resume now: those whose time ran out, and decided ones nobody resumed."""
        if self.approvals is None:
            return []
        expired = await self.approvals.expire_due(self.clock(), platform)
        ready = await self.approvals.ready_requests(platform)
        return list(dict.fromkeys([*expired, *ready]))

    async def resume(
        self, request_id: str, progress: Progress = no_progress, *, held: bool = False
    ) -> AgentReply | None:
        """Go on with a parked turn once every call is decided; None if still open or taken elsewhere."""
        if self.approvals is None:
            return None
        found = await self.approvals.prompt(request_id)
        if found is None:
            return None
        # The thread first, then the claim: only one process at a time holds a thread, so a request
        # is resumed once, and one still marked resuming belongs to a process that stopped. No turn
        # slot is taken: a resume follows a person's decision and must not be refused as busy.
        with turn_context(found[0].key), turn_span():
            async with contextlib.nullcontext() if held else self.locks.hold(found[0].key):
                parked = await self.approvals.claim(request_id, self.clock())
                if parked is None:
                    return None
                try:
                    return await self._resume_claimed(request_id, parked, progress)
                except BaseException:
                    # Given back, so the next sweep or start resumes it; nothing of the round was stored.
                    await finish_anyway(self.approvals.release_claim(request_id))
                    raise

    @metrics.turn
    async def _resume_claimed(self, request_id: str, parked: ParkedTurn, progress: Progress) -> AgentReply:
        assert self.approvals is not None
        incoming = parked.incoming
        history = await self.loop.store.history(incoming.key)
        state = state_so_far(history, {t.name: t.server for t in self.loop.tools(incoming)})
        metrics.approval_resumed(request_id, parked.calls)
        # Its own deadline: the time the turn was parked was nobody's model work.
        deadline = TurnDeadline(self.loop.config.turn_deadline)
        finished: dict[str, CallOutcome] = {}
        signing_in = {w.call_id for w in await self.approvals.sign_in_waits(request_id)}
        try:
            ran_out: TurnOverdue | None = None
            try:
                async with deadline.running("tools"):
                    outcomes = await run_decided(
                        self.loop, self.inputs, parked, signing_in, state, progress, deadline, finished
                    )
            except TurnOverdue as exc:
                # The round is closed all the same, or every sweep would resume it again: a call
                # still running when time ran out is told to the model as stopped, under its id.
                ran_out = exc
                outcomes = [
                    finished.get(call.id) or stopped(call, parked, exc) for call in parked.answer.tool_calls
                ]
            round_messages = [parked.answer, *(o.message for o in outcomes)]
            await self.approvals.finish_parked(request_id, incoming.key, round_messages)
            expired = [c for c in parked.calls if c.status == "expired"]
            place = place_id(incoming.where())
            await self._audit(incoming.key, place, expired, NERVE, "expired: not approved in time")
            history.extend(round_messages)
            state.attachments.extend(o.attachment for o in outcomes)
            if ran_out is not None:
                raise ran_out
            if stop := self.loop.stop_reason(outcomes, state):
                return await self.loop.finish(incoming.key, stop, state, Usage())
            result = await self.loop.run(
                incoming, history, state, progress, deadline=deadline, first_round=parked.rounds_used
            )
            return await self.settle(result, progress)
        except (LLMError, TurnOverdue) as exc:
            return self.loop.ended(incoming, exc, state)

    async def recover_parked(self, platform: str | None = None) -> list[str]:
        """At start-up: requests ready to resume, and those a stopped process was resuming."""
        if self.approvals is None:
            return []
        await self.approvals.expire_due(self.clock(), platform)
        return await self.approvals.ready_requests(platform, resuming=True)


def _listed(names: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(names))


def _waiting_for_approval(prompt: ApprovalPrompt) -> str:
    if all(call.summary is not None for call in prompt.calls):
        asked = _listed(call.summary.headline for call in prompt.calls if call.summary is not None)
        return f"Waiting for you to confirm: {asked}"
    return f"Waiting for approval to run {_listed(call.tool for call in prompt.calls)}."

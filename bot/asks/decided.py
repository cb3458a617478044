"""The round a parked turn goes on with, once its calls are decided: exactly the approved calls run
as shown, the others are told to the model under their ids, and the results kept from before are
read back. The one part of parking that runs tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.asks.inputs import InputDesk
from bot.errors import TurnOverdue
from bot.store.approvals import ParkedTurn
from bot.turn.calls import (
    CallOutcome,
    Outcome,
    TurnState,
    Waiting,
    call_outcome,
    failure_of,
    stored_arguments,
    stored_attachment,
    stored_results,
)
from bot.turn.deadline import TurnDeadline
from bot.turn.failures import stored_failure
from bot.turn.loop import TurnLoop
from bot.types import ChatMessage, Progress, ToolCall

DENIED_HINT = (
    "The user denied this call. Do not call it again unless they ask for it; "
    "answer without it or propose something else."
)
# Who denies a call when no person can be asked (`nerve ask` in a script without --yes), and why:
# recorded as nerve's decision, so neither the history nor the model reads it as a person's refusal.
NERVE = "nerve"
NO_ONE_TO_ASK = "no one to ask (not on a terminal; use --yes)"
NO_ONE_TO_ASK_HINT = (
    "Nobody was there to approve this call, so it did not run; no person refused it. "
    "Do not call it again now: answer without it, and say that it needs approval."
)
NOT_APPROVED_HINT = "Nobody approved this call in time. Do not call it again unless the user asks."
NOT_SIGNED_IN_HINT = "Tell the user the call needs them to connect their account; do not call it again now."


# Failures after which a tool is not called again in the same turn (see `RoundRunner.execute`).
_NOT_CALLED_AGAIN = frozenset({"execution", "timeout", "unavailable", "rate_limited"})


def _kept(call: ToolCall, message: ChatMessage, server: str | None = None) -> CallOutcome:
    """A result stored earlier in the turn, as an outcome of its round (`server`: where it likely ran)."""
    failure = stored_failure(message)
    attachment = stored_attachment(call, message, server)
    outcome: Outcome = "ok"
    if message.is_error:
        outcome = "failed" if failure is not None and failure.kind in _NOT_CALLED_AGAIN else "fix_arguments"
    return CallOutcome(message=message, attachment=attachment, outcome=outcome, failure=failure)


def stopped(call: ToolCall, parked: ParkedTurn, error: TurnOverdue) -> CallOutcome:
    """An approved call cut off by the turn's deadline (it may have done part of its work)."""
    pending = next(c for c in parked.calls if c.call_id == call.id)
    detail = f"it was stopped before it finished, when the answer ran out of time ({error.seconds:g} s)"
    hint = "It may or may not have taken effect. Do not call it again unless the user asks."
    failure = failure_of(call, "execution", detail, hint)
    return call_outcome(call, pending.arguments, "not_run", failure)


async def run_decided(
    loop: TurnLoop,
    inputs: InputDesk | None,
    parked: ParkedTurn,
    signing_in: set[str],
    state: TurnState,
    progress: Progress,
    deadline: TurnDeadline,
    finished: dict[str, CallOutcome],
) -> list[CallOutcome]:
    """A parked round's outcomes in call order, once its calls are decided: kept results, approved
    calls run now, the others refused to the model (`signing_in`: the calls that waited for a
    sign-in); each goes into `finished` as it comes, so a round cut off by the deadline keeps them."""
    done = {m.tool_call_id: m for m in parked.done}
    decided = {c.call_id: c for c in parked.calls}
    specs = {t.name: t for t in loop.tools(parked.incoming)}

    async def one(call: ToolCall) -> CallOutcome:
        if call.id in done:
            ran_on = specs[call.name].server if call.name in specs else None
            return _kept(call, done[call.id], ran_on)
        pending = decided[call.id]
        answered = await inputs.answers_for(parked.request_id, call.id, progress) if inputs else None
        if pending.status == "approved" or (answered is not None and pending.status == "expired"):
            # Exactly what was shown: the same server's tool (found by server and tool: another
            # server may have taken its name since), with the same definition (compared by
            # value: the catalog is rebuilt whenever any server changes state).
            shown = (pending.server, pending.tool)
            spec = next((t for t in specs.values() if (t.server, t.original_name) == shown), None)
            if spec is None or (pending.definition_hash and spec.definition_hash != pending.definition_hash):
                detail = "its tool is no longer available as it was when it was approved"
                failure = failure_of(call, "unavailable", detail, "Answer without it.")
            else:
                context = loop.call_contexts(parked.incoming, progress, deadline)(call, spec)
                # Made again with the answers; what it asks after them is asked while it waits.
                context = replace(context, park=False, resume=answered, approved=pending.status == "approved")
                ran = await loop.runner.execute(
                    call, spec, pending.arguments, state, progress, specs, context
                )
                if not isinstance(ran, Waiting):  # never parked again (park=False): only for the type
                    return ran
                failure = failure_of(call, "execution", "it asked for input again", "Answer without it.")
        elif pending.status == "denied" and pending.decided_by == NERVE:
            failure = failure_of(call, "denied", f"{NERVE} denied it: {NO_ONE_TO_ASK}", NO_ONE_TO_ASK_HINT)
        elif pending.status == "denied":
            who = pending.decided_by or "a person"
            failure = failure_of(call, "denied", f"{who} denied it", DENIED_HINT)
        elif call.id in signing_in:
            detail = f"the person did not sign in to {pending.server} in time"
            failure = failure_of(call, "not_approved", detail, NOT_SIGNED_IN_HINT)
        else:
            failure = failure_of(call, "not_approved", "it was not approved in time", NOT_APPROVED_HINT)
        return call_outcome(call, pending.arguments, "not_run", failure, server=pending.server)

    async def recorded(call: ToolCall) -> CallOutcome:
        finished[call.id] = outcome = await one(call)
        return outcome

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(recorded(call)) for call in parked.answer.tool_calls]
    return [task.result() for task in tasks]


def state_so_far(history: Sequence[ChatMessage], servers: Mapping[str, str] | None = None) -> TurnState:
    """The guards' memory of this turn, read back from what it stored before it was parked
    (`servers`: the server of each tool offered now, so its attachments say where they ran)."""
    state = TurnState()
    start = max((i for i, m in enumerate(history) if m.role == "user"), default=-1) + 1
    turn = history[start:]
    calls = {call.id: call for m in turn for call in m.tool_calls}
    for call in calls.values():
        state.guard.allow(call.name, stored_arguments(call.arguments))
    for call, message in stored_results(turn):
        kept = _kept(call, message, (servers or {}).get(call.name))

        state.attachments.append(kept.attachment)
        if kept.outcome == "failed" and kept.failure is not None:
            state.failed.setdefault(call.name, kept.failure)

    return state

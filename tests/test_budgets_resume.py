"""A turn resumed after an approval counts like any other: when its person's limit was reached
while it waited, the resumed turn is not sent to the model and says why."""

from __future__ import annotations

import pytest

from bot.budgets.rules import parse_budgets
from bot.store.usage import Reservation, UsageEntry
from bot.types import Usage
from tests import test_approvals as approvals
from tests.answering import decide
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.test_approvals import REQUESTER, ask, make_agent

pytestmark = pytest.mark.both_stores
host, notes = approvals.host, approvals.notes
__all__ = ["host", "notes"]


async def test_a_resumed_turn_is_refused_when_the_limit_was_reached_while_it_waited(
    host, store, notes
) -> None:
    llm = ScriptedLLM(
        [Step(calls=[Call("append_note", {"text": "hi"}, id="c_add")], usage=Usage(prompt_tokens=50))]
    )
    agent = make_agent(llm, host, store, budgets=parse_budgets('{"person": {"day": {"tokens": 100}}}'))
    parked = await agent.reply(ask("add hi"))
    assert parked.approval is not None

    # Meanwhile the same person spends the rest of the day's tokens elsewhere.
    elsewhere = UsageEntry(
        turn=None,
        conversation="c",
        person="slack:T1:U1",
        place="slack:C9",
        workspace="slack:T1",
        platform="slack",
        model="m",
    )
    reserved = await store.reserve_usage(elsewhere, Usage(), None, [], at=1_000_000.0)
    assert isinstance(reserved, Reservation)
    await store.settle_usage(reserved.id, "m", Usage(prompt_tokens=60), None)

    decision = await decide(agent, parked.approval.request_id, REQUESTER, approve=True, call_id="c_add")
    assert decision.ready
    resumed = await agent.resume(parked.approval.request_id)
    assert (
        resumed is not None
        and "You have reached the daily limit of 100 tokens (110 tokens used today)" in resumed.text
    )
    llm.assert_complete()  # the model was asked once, before the approval

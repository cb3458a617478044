"""A message whose turn is parked, delivered again (a platform replaying it after a restart), is
that turn's own request once more: never a message waiting behind itself, never answered twice."""

from __future__ import annotations

from tests.answering import decide
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.test_approvals import KEY, REQUESTER, ask, host, make_agent, notes, ran  # noqa: F401


async def test_the_message_a_parked_turn_waits_on_delivered_again_gets_the_same_request(
    host,  # noqa: F811
    store,
    notes,  # noqa: F811
):
    llm = ScriptedLLM([Step(calls=[Call("append_note", {"text": "x"}, id="c1")]), Step(text="added")])
    agent = make_agent(llm, host, store)
    parked = await agent.reply(ask("add x", event_id="ev1"))
    assert parked.approval is not None

    again = await agent.reply(ask("add x", event_id="ev1"))

    assert not again.deferred and again.approval is not None
    assert again.approval.request_id == parked.approval.request_id
    assert await store.next_deferred(KEY) is None
    await decide(agent, parked.approval.request_id, REQUESTER, approve=True)
    assert (await agent.resume(parked.approval.request_id)) is not None
    assert [r async for r in agent.deferred_replies(KEY)] == []
    assert ran(notes) == ["append_note"]
    assert len(llm.requests) == 2

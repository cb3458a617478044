"""A person's click on an approval, through the façade's one way to answer (`Agent.answer`).

The tests of approvals read what the click did (`Decision`); an ask that is gone or ran out of time
is an `AskError`, which the tests that expect one catch themselves.
"""

from __future__ import annotations

from bot.agent import Agent
from bot.types import Approve, Decision, Deny


async def decide(
    agent: Agent,
    request_id: str,
    person: str,
    *,
    approve: bool,
    call_id: str | None = None,
    shown_hash: str | None = None,
    remember: bool = False,
) -> Decision:
    """`person` approves or denies the call `call_id` (every open one when None) of `request_id`."""
    answer = (
        Approve(call_id=call_id, shown_hash=shown_hash, remember=remember)
        if approve
        else Deny(call_id=call_id, shown_hash=shown_hash)
    )
    answered = await agent.answer(request_id, person, answer)
    assert answered.decision is not None
    return answered.decision

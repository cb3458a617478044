"""What front ends ask the façade instead of reaching for the agent's ledgers: the same answers
with approvals and per-person servers as without them, so a front end never checks which it has."""

from __future__ import annotations

from bot.agent import Agent
from bot.asks.answering import NO_SIGN_INS
from bot.types import ConversationKey
from tests.fakes.scripted import ScriptedLLM

KEY = ConversationKey(platform="terminal", workspace="alice", channel="cli", thread="t")


def bare_agent(store: object, *, approvals: bool) -> Agent:
    """An agent whose host is never asked anything here (no turn runs)."""
    return Agent(
        llm=ScriptedLLM([]),
        host=object(),  # type: ignore[arg-type]
        store=store,  # type: ignore[arg-type]
        inbox=store,  # type: ignore[arg-type]
        approvals=store if approvals else None,  # type: ignore[arg-type]
    )


async def test_a_thread_with_nothing_parked_has_no_parked_turn_and_no_decisions(store):
    for approvals in (True, False):
        agent = bare_agent(store, approvals=approvals)
        assert await agent.parked_in(KEY) is None
        assert await agent.audit_log(KEY) == []


async def test_without_per_person_servers_there_is_nothing_to_sign_in_to(store):
    agent = bare_agent(store, approvals=True)
    assert agent.sign_in_servers() == []
    assert await agent.connected(KEY, "alice") == []
    assert await agent.disconnect(KEY, "alice", "notes") is False
    started = await agent.connect(KEY, "alice", "notes")
    assert started.sign_in is None and started.note == NO_SIGN_INS

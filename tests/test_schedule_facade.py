"""What the façade lets people do with schedules: list their own and everyone's, see a schedule's
runs, cancel their own (an admin anyone's, as with a place's memories), pause and resume only their
own; and a resume wakes the runners so a near slot is not late."""

from __future__ import annotations

from bot.agent import Agent, AgentConfig, RunOutcome
from bot.store.schedules import new_schedule_id
from bot.types import ConversationKey, Person, Schedule
from tests.fakes.scripted import ScriptedLLM

NOW = 1_796_630_400.0
GENERAL = ConversationKey(platform="slack", workspace="T1", channel="CGEN", thread="")
ALICE = Person(id="slack:T1:UALICE", platform="slack", user_id="UALICE", workspace="T1")
BOB = Person(id="slack:T1:UBOB", platform="slack", user_id="UBOB", workspace="T1")
ADMIN = Person(id="slack:T1:UADMIN", platform="slack", user_id="UADMIN", workspace="T1")


def agent_on(store: object) -> Agent:
    return Agent(
        llm=ScriptedLLM([]),
        host=object(),  # type: ignore[arg-type]
        store=store,  # type: ignore[arg-type]
        inbox=store,  # type: ignore[arg-type]
        config=AgentConfig(admins=frozenset({"UADMIN"})),
    )


def alices(prompt: str = "post the AQI", created_at: float = NOW) -> Schedule:
    return Schedule(
        id=new_schedule_id(),
        owner=ALICE.id,
        owner_user=ALICE.user_id,
        key=GENERAL,
        place="#general",
        prompt=prompt,
        first_at=NOW,
        rule="FREQ=DAILY",
        timezone="Europe/Paris",
        status="active",
        created_at=created_at,
    )


async def test_only_the_owner_pauses_and_resumes_and_an_admin_may_cancel(store) -> None:
    agent = agent_on(store)
    first, second = alices(), alices("water the plants", NOW + 1)
    for schedule in (first, second):
        await store.add_schedule(schedule)

    assert [s.id for s in await agent.schedules_of(ALICE.id)] == [first.id, second.id]
    assert await agent.schedules_of(BOB.id) == []
    assert len(await agent.all_schedules()) == 2

    assert await agent.pause_schedule(first.id, BOB) == "not_yours"
    assert await agent.pause_schedule(first.id, ADMIN) == "not_yours"  # pausing is the owner's
    assert await agent.pause_schedule(first.id, ALICE) == "changed"
    assert await agent.pause_schedule(first.id, ALICE) == "gone"  # paused already
    assert await agent.resume_schedule(second.id, ALICE) == "gone"  # not paused

    runner = agent.schedule_runner(_never, mine=lambda s: True)
    assert not runner.wake.is_set()
    assert await agent.resume_schedule(first.id, BOB) == "not_yours"
    assert await agent.resume_schedule(first.id, ALICE) == "changed"
    assert runner.wake.is_set()  # the runner looks at once

    assert await agent.cancel_schedule(first.id, BOB) == "not_yours"
    assert await agent.cancel_schedule(first.id, ADMIN) == "changed"
    assert await agent.cancel_schedule(second.id, ALICE) == "changed"
    assert await agent.cancel_schedule(second.id, ALICE) == "gone"
    assert await agent.cancel_schedule("s00000000", ALICE) == "gone"
    cancelled = await agent.schedule(first.id)
    assert cancelled is not None and (cancelled.status, cancelled.changed_by) == ("cancelled", ADMIN.id)
    assert await agent.schedules_of(ALICE.id) == []
    assert await agent.schedule_runs(first.id) == []


async def _never(schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
    raise AssertionError("no run here")

"""Usage recorded per request and budgets enforced before the model, on SQLite and PostgreSQL: a
person's daily limit reached mid-thread, a place's limit, two turns racing at a limit, the reset at
midnight in the budgets' zone (a fake clock), admins exempt, the 80 % notice, the person's report."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.agent import Agent, AgentConfig
from bot.budgets.rules import parse_budgets, parse_prices
from bot.policy.scopes import Place
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR
from bot.store.sqlite import SQLiteStore
from bot.store.usage import Check, Refused, Reservation, UsageEntry
from bot.types import ChatMessage, Completion, ConversationKey, Incoming, Person, Usage
from tests.fakes.scripted import ScriptedLLM, Step
from tests.test_slack_harness import StaticHost

pytestmark = pytest.mark.both_stores

# Monday 7 December 2026, 10:00 UTC: no test reads today's date.
MONDAY = datetime(2026, 12, 7, 10, 0, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def said(text: str, user: str = "UALICE", channel: str = "CGEN", thread: str = "t1", n: int = 0) -> Incoming:
    key = ConversationKey(platform="slack", workspace="T1", channel=channel, thread=thread)
    return Incoming(key=key, text=text, user_id=user, event_id=f"e-{user}-{thread}-{n}")


def agent_on(
    store: object, llm: object, budgets: str = "", clock: Clock | None = None, **config: object
) -> Agent:
    settings = AgentConfig(
        admins=frozenset({"UADMIN"}),
        budgets=parse_budgets(budgets),
        **{"model": "gpt-test", **config},  # type: ignore[arg-type]
    )
    return Agent(
        llm=llm,  # type: ignore[arg-type]
        host=StaticHost(),
        store=store,  # type: ignore[arg-type]
        inbox=store,  # type: ignore[arg-type]
        config=settings,
        clock=clock or Clock(MONDAY),
    )


def used(prompt: int, completion: int, cached: int = 0) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


async def rows(store) -> list[tuple]:
    return list(
        await store._rows(
            "SELECT person, place, workspace, platform, model, prompt_tokens, cached_tokens,"
            " completion_tokens, cost, estimated, settled, turn FROM model_usage ORDER BY at, id"
        )
    )


async def test_every_request_is_recorded_with_its_person_place_workspace_model_and_price(store) -> None:
    llm = ScriptedLLM([Step(text="fine", usage=used(1200, 300, cached=1000))])
    agent = agent_on(
        store, llm, prices=parse_prices('{"gpt-test": {"prompt": 1.0, "cached": 0.5, "completion": 4.0}}')
    )
    answer = await agent.reply(said("how is the air?"))
    assert answer.text == "fine"
    [row] = await rows(store)
    assert tuple(row[:8]) == (
        "slack:T1:UALICE",
        "slack:CGEN",
        "slack:T1",
        "slack",
        "gpt-test",
        1200,
        1000,
        300,
    )
    # 200 fresh prompt tokens at 1.0, 1000 cached at 0.5, 300 completion at 4.0, per million.
    assert row[8] == pytest.approx((200 * 1.0 + 1000 * 0.5 + 300 * 4.0) / 1e6)
    assert (row[9], row[10], row[11]) == (0, 1, "e-UALICE-t1-0")


async def test_an_answer_without_usage_is_recorded_as_an_estimate(store) -> None:
    agent = agent_on(store, ScriptedLLM([Step(text="a short answer")]))
    await agent.reply(said("how is the air?"))
    [row] = await rows(store)
    assert row[5] > 0 and row[7] > 0  # prompt and completion, estimated from the texts
    assert (row[9], row[10]) == (1, 1) and row[8] is None  # marked estimated; no price set


async def test_a_persons_daily_limit_reached_mid_thread_refuses_before_the_model(store) -> None:
    llm = ScriptedLLM([Step(text="one", usage=used(80, 30))])
    agent = agent_on(store, llm, '{"person": {"day": {"tokens": 100}}}')
    assert (await agent.reply(said("first", n=1))).text == "one"

    refused = await agent.reply(said("second", n=2))
    assert len(llm.requests) == 1  # the second message never reached the model
    assert "You have reached the daily limit of 100 tokens (110 tokens used today)" in refused.text
    assert "resets at 00:00 UTC on Tue 8 Dec" in refused.text
    assert "An admin (UADMIN) can raise it." in refused.text
    history = await store.history(said("x").key)
    assert [(m.role, m.content) for m in history][-2:] == [("user", "second"), ("assistant", refused.text)]

    # Another person in the same place has a budget of their own.
    llm_after = ScriptedLLM([Step(text="yours", usage=used(10, 2))])
    other = agent_on(store, llm_after, '{"person": {"day": {"tokens": 100}}}')
    assert (await other.reply(said("mine", user="UBOB", thread="t2"))).text == "yours"


async def test_a_place_limit_holds_everyone_there_and_an_override_by_id_raises_it(store) -> None:
    budgets = (
        '{"place": {"day": {"tokens": 100}}, "overrides": {"place": {"CBUSY": {"day": {"tokens": 1000}}}}}'
    )
    llm = ScriptedLLM([Step(text="a", usage=used(90, 20)), Step(text="b", usage=used(90, 20))])
    agent = agent_on(store, llm, budgets)
    assert (await agent.reply(said("q", user="UALICE"))).text == "a"
    refused = await agent.reply(said("q", user="UBOB", thread="t2"))
    assert refused.text.startswith("⛔ This conversation's place has reached the daily limit of 100 tokens")
    assert (await agent.reply(said("q", user="UBOB", channel="CBUSY", thread="t3"))).text == "b"
    llm.assert_complete()


async def test_admins_are_exempt_unless_the_budgets_say_otherwise(store) -> None:
    spent = ScriptedLLM([Step(text="a", usage=used(200, 0)), Step(text="b", usage=used(1, 1))])
    agent = agent_on(store, spent, '{"workspace": {"month": {"tokens": 100}}}')
    assert (await agent.reply(said("q", user="UADMIN"))).text == "a"
    assert (await agent.reply(said("q", user="UADMIN", n=1))).text == "b"
    assert "This workspace has reached the monthly limit" in (await agent.reply(said("q", thread="t2"))).text

    held = agent_on(
        store, ScriptedLLM([]), '{"workspace": {"month": {"tokens": 100}}, "admins_exempt": false}'
    )
    assert "monthly limit" in (await held.reply(said("q", user="UADMIN", thread="t3"))).text


async def test_the_day_resets_at_midnight_in_the_budgets_zone(store) -> None:
    # 22:30 UTC on Monday is 23:30 in Paris; 23:00:01 UTC is just past midnight there.
    clock = Clock(datetime(2026, 12, 7, 22, 30, tzinfo=UTC).timestamp())
    llm = ScriptedLLM([Step(text="a", usage=used(100, 0)), Step(text="b", usage=used(1, 1))])
    agent = agent_on(
        store, llm, '{"person": {"day": {"tokens": 100}}}', clock=clock, budget_zone="Europe/Paris"
    )
    assert (await agent.reply(said("q", n=1))).text == "a"
    refused = await agent.reply(said("q", n=2))
    assert "resets at 00:00 CET on Tue 8 Dec" in refused.text
    clock.now = datetime(2026, 12, 7, 23, 0, 1, tzinfo=UTC).timestamp()
    assert (await agent.reply(said("q", n=3))).text == "b"


async def test_from_eighty_percent_the_answer_carries_one_short_notice(store) -> None:
    llm = ScriptedLLM([Step(text="a", usage=used(85, 0)), Step(text="b", usage=used(1, 1))])
    agent = agent_on(store, llm, '{"person": {"day": {"tokens": 100}, "month": {"tokens": 100}}}')
    assert (await agent.reply(said("q", n=1))).text == "a"
    answer = await agent.reply(said("q", n=2))
    notices = [line for line in answer.text.splitlines() if line.startswith("ℹ️")]
    assert notices == ["ℹ️ You used 85 % of the daily limit of 100 tokens (resets at 00:00 UTC on Tue 8 Dec)."]
    assert answer.text.endswith("b")


class GatedLLM:
    """Answers only once let through, so a turn can be held inside its model request."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.go = asyncio.Event()
        self.requests = 0

    async def complete(self, messages, tools, progress) -> Completion:
        self.requests += 1
        self.asked.set()
        await self.go.wait()
        return Completion(message=ChatMessage(role="assistant", content="done"), usage=used(5, 5))


async def test_a_turn_at_the_limit_sees_the_running_turns_reservation(store) -> None:
    budgets = '{"place": {"day": {"tokens": 100}}}'
    # 60 tokens already used: room for one more turn, whose reservation takes the rest.
    primer = agent_on(store, ScriptedLLM([Step(text="p", usage=used(60, 0))]), budgets)
    await primer.reply(said("prime", thread="t0"))
    llm = GatedLLM()
    agent = agent_on(
        store, llm, budgets, system_prompt="x " * 120, turn_deadline=30.0
    )  # a request estimated past 40 tokens
    running = asyncio.create_task(agent.reply(said("q", thread="t1")))
    async with asyncio.timeout(10):
        await llm.asked.wait()
    second = await agent.reply(said("q", user="UBOB", thread="t2"))
    assert "reached the daily limit" in second.text
    llm.go.set()
    assert (await running).text == "done"
    assert llm.requests == 1


async def test_racing_reservations_at_a_limit_are_granted_only_while_there_is_room(store) -> None:
    entry = UsageEntry(
        turn=None,
        conversation="c",
        person="p",
        place="slack:C",
        workspace="slack:T",
        platform="slack",
        model="m",
    )
    check = Check(column="place", subject="slack:C", since=0.0, money=False, amount=100)
    results = await asyncio.gather(
        *(store.reserve_usage(entry, used(30, 0), None, [check], at=MONDAY) for _ in range(10))
    )
    # 0, 30, 60, 90 are under 100: four granted; every later one sees them.
    assert [isinstance(r, Reservation) for r in results].count(True) == 4
    assert all(r.used.tokens == 120 for r in results if isinstance(r, Refused))


async def test_the_report_shows_the_persons_figures_and_an_admin_also_the_place_and_workspace(store) -> None:
    llm = ScriptedLLM([Step(text="a", usage=used(40, 2)), Step(text="b", usage=used(3, 3))])
    agent = agent_on(
        store, llm, '{"person": {"day": {"tokens": 1000}}, "workspace": {"month": {"money": 5}}}'
    )
    await agent.reply(said("q"))
    await agent.reply(said("q", user="UADMIN", thread="t2"))
    mine = await agent.usage(said("?"))
    assert mine is not None and not mine.exempt
    [figures] = mine.figures
    assert (figures.subject, figures.id, figures.day.tokens, figures.day.token_limit) == (
        "person",
        "slack:T1:UALICE",
        42,
        1000,
    )
    assert figures.month.tokens == 42 and figures.day.money is None  # no prices: no money
    admins = await agent.usage(said("?", user="UADMIN"))
    assert admins is not None and admins.exempt
    assert [(f.subject, f.day.tokens) for f in admins.figures] == [
        ("person", 6),
        ("place", 48),
        ("workspace", 48),
    ]
    assert admins.figures[2].month.money_limit == 5


async def test_a_forgotten_persons_usage_stays_in_the_totals_without_them(store) -> None:
    agent = agent_on(store, ScriptedLLM([Step(text="a", usage=used(10, 1))]))
    await agent.reply(said("q"))
    await store.forget_person(
        Person(id="slack:T1:UALICE", platform="slack", user_id="UALICE", workspace="T1")
    )
    [row] = await rows(store)
    assert row[0] is None and row[1] == "slack:CGEN" and row[5] == 10


async def test_a_forgotten_persons_private_usage_no_longer_names_their_dm(store) -> None:
    from bot.store.person_data import FORGOTTEN_PRIVATE

    llm = ScriptedLLM([Step(text="a", usage=used(10, 1)), Step(text="b", usage=used(7, 1))])
    agent = agent_on(store, llm)
    in_dm = said("q", channel="D42")
    await agent.reply(replace(in_dm, place=Place(platform="slack", channel="D42", dm=True, user="UALICE")))
    await agent.reply(said("q", user="UBOB", thread="t9"))  # a shared channel, someone else's: kept
    await store.forget_person(
        Person(id="slack:T1:UALICE", platform="slack", user_id="UALICE", workspace="T1")
    )
    dm, bobs = await store._rows(
        "SELECT person, place, conversation, turn, workspace, prompt_tokens FROM model_usage"
        " ORDER BY prompt_tokens DESC"
    )
    assert tuple(dm) == (None, FORGOTTEN_PRIVATE, FORGOTTEN_PRIVATE, None, "slack:T1", 10)
    assert tuple(bobs) == ("slack:T1:UBOB", "slack:CGEN", "slack:T1:CGEN:t9", "e-UBOB-t9-0", "slack:T1", 7)


def test_a_mistyped_budget_or_price_is_refused_at_start_naming_the_setting_and_field() -> None:
    from bot.config import Settings
    from bot.errors import ConfigError
    from bot.runtime import agent_config

    with pytest.raises(ConfigError, match=r"NERVE_BUDGETS: person\.day\.tokens"):
        agent_config(Settings(nerve_budgets='{"person": {"day": {"tokens": "lots"}}}'))
    with pytest.raises(ConfigError, match=r"NERVE_PRICES: gpt\.completion"):
        agent_config(Settings(nerve_prices='{"gpt": {"prompt": 1}}'))
    assert agent_config(Settings(nerve_budget_timezone="Europe/Paris")).budget_zone == "Europe/Paris"


async def test_a_scheduled_turn_counts_and_is_refused_at_the_limit_like_any_other(store) -> None:
    llm = ScriptedLLM([Step(text="ran", usage=used(100, 0))])
    agent = agent_on(store, llm, '{"person": {"day": {"tokens": 100}}}')
    assert (await agent.reply(replace(said("post the AQI", n=1), scheduled="s1"))).text == "ran"
    refused = await agent.reply(replace(said("post the AQI", n=2), scheduled="s1"))
    assert "You have reached the daily limit of 100 tokens" in refused.text
    assert len(llm.requests) == 1


async def test_a_database_of_the_previous_schema_gains_the_usage_ledger(tmp_path) -> None:
    older = tmp_path / "migrations"
    # The schema before the usage ledger: every migration up to 0019.
    before = shutil.ignore_patterns("postgres", "0019_*", "002*")
    shutil.copytree(DEFAULT_MIGRATIONS_DIR, older, ignore=before)
    path = tmp_path / "upgraded.db"
    async with await SQLiteStore.open(path, migrations_dir=older):
        pass
    async with await SQLiteStore.open(path) as upgraded:
        agent = agent_on(upgraded, ScriptedLLM([Step(text="fine", usage=used(3, 1))]))
        assert (await agent.reply(said("q"))).text == "fine"
        assert [row[5] for row in await rows(upgraded)] == [3]


def test_money_limits_without_any_price_are_refused_at_start() -> None:
    from bot.config import Settings
    from bot.errors import ConfigError
    from bot.runtime import agent_config

    with pytest.raises(ConfigError, match="NERVE_PRICES"):
        agent_config(Settings(nerve_budgets='{"workspace": {"month": {"money": 50}}}'))


class FallbackLLM:
    """Answers as a fallback model would: the completion names the model that answered."""

    async def complete(self, messages, tools, progress) -> Completion:
        message = ChatMessage(role="assistant", content="from the fallback")
        return Completion(message=message, usage=used(1000, 100), model="cheap")


async def test_usage_is_recorded_and_priced_under_the_model_that_answered(store) -> None:
    prices = parse_prices(
        '{"main": {"prompt": 10, "completion": 10}, "cheap": {"prompt": 1, "completion": 2}}'
    )
    agent = agent_on(store, FallbackLLM(), prices=prices, model="main")
    assert (await agent.reply(said("q"))).text == "from the fallback"
    [row] = await rows(store)
    assert row[4] == "cheap" and row[8] == pytest.approx((1000 * 1 + 100 * 2) / 1e6)


async def test_a_failed_request_releases_its_reservation_and_without_budgets_leaves_no_row(store) -> None:
    from bot.errors import LLMUnavailable

    down = Step(error=LLMUnavailable("the model service is down"))
    held = agent_on(store, ScriptedLLM([down]), '{"person": {"day": {"tokens": 100}}}')
    assert (await held.reply(said("q", n=1))).failed
    assert [(row[5], row[7], row[10]) for row in await rows(store)] == [(0, 0, 1)]  # released, settled
    free = agent_on(store, ScriptedLLM([down]))
    assert (await free.reply(said("q", thread="t2"))).failed
    assert len(await rows(store)) == 1

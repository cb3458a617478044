"""The adaptive limit on turns at once: scripted answers, 429s and latencies on a fake clock."""

from __future__ import annotations

import asyncio

from bot.config import Settings
from bot.model.client import OpenAILLM
from bot.model.concurrency import AdaptiveLimit, ConcurrencyLimits
from bot.runtime import open_runtime
from bot.turn.gate import TurnGate
from bot.types import ChatMessage, ConversationKey, Incoming, TurnEvent
from tests.fakes.llm_server import FakeLLMServer, rate_limited, reply


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def busy_round(limit: AdaptiveLimit, clock: Clock, *, latency: float = 0.2, rate_limited: int = 0) -> None:
    """Every slot sends a request at once; all answer after `latency`, the last `rate_limited` with 429."""
    tickets = [limit.sent() for _ in range(limit.limit)]
    clock.now += latency
    for i, ticket in enumerate(tickets):
        if i >= len(tickets) - rate_limited:
            limit.rate_limited(ticket)
        else:
            limit.answered(ticket)


def test_the_limit_starts_at_16_and_doubles_each_busy_round_up_to_the_ceiling() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, clock=clock)
    assert limit.limit == 16
    seen = []
    for _ in range(4):
        busy_round(limit, clock)
        seen.append(limit.limit)
    assert seen == [32, 64, 100, 100]


def test_a_limit_never_starts_above_its_ceiling_nor_falls_below_its_floor() -> None:
    clock = Clock()
    assert AdaptiveLimit(ceiling=2, clock=clock).limit == 2
    limit = AdaptiveLimit(ceiling=50, floor=4, clock=clock)
    for _ in range(20):
        limit.rate_limited(limit.sent())
    assert limit.limit == 4


def test_a_429_cuts_the_limit_by_a_quarter_once_for_every_request_sent_before_the_cut() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, initial=40, clock=clock)
    busy_round(limit, clock, rate_limited=30)
    # Thirty 429s of one crowded moment are one signal: 40 grew by the 10 answers, then one cut.
    assert limit.cuts == 1
    assert limit.limit == int(50 * 0.75)
    # A request sent after the cut that is refused again cuts again.
    limit.rate_limited(limit.sent())
    assert limit.cuts == 2


def test_after_a_cut_the_limit_grows_by_about_one_per_busy_round() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, initial=20, clock=clock)
    limit.rate_limited(limit.sent())
    assert limit.limit == 15
    busy_round(limit, clock)
    assert limit.limit == 16
    busy_round(limit, clock)
    assert limit.limit == 17


def test_the_limit_does_not_grow_while_the_model_is_not_kept_busy() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, clock=clock)
    for _ in range(50):  # one request at a time
        ticket = limit.sent()
        clock.now += 0.2
        limit.answered(ticket)
    assert limit.limit == 16


def test_a_latency_jump_cuts_the_limit_once_and_becomes_the_new_usual() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, initial=20, clock=clock)
    for _ in range(3):
        busy_round(limit, clock, latency=1.5)
    grown = limit.limit
    assert limit.cuts == 0
    busy_round(limit, clock, latency=6.0)
    assert limit.cuts == 1 and limit.limit < grown
    # Still slow, but no slower: no further cut.
    cut_to = limit.limit
    busy_round(limit, clock, latency=6.0)
    busy_round(limit, clock, latency=6.0)
    assert limit.cuts == 1 and limit.limit >= cut_to


def test_answers_slower_by_a_fraction_of_a_second_are_no_jump() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, initial=20, clock=clock)
    # An instant model first (0 ms), then one taking 0.2 s, then a busy machine making it 0.8 s.
    for latency in (0.0, 0.0, 0.2, 0.8, 0.8):
        busy_round(limit, clock, latency=latency)
    assert limit.cuts == 0 and limit.limit == 100


def test_other_failures_neither_grow_nor_cut_the_limit() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=100, clock=clock)
    for _ in range(30):
        limit.failed(limit.sent())
    assert (limit.limit, limit.cuts, limit.in_flight) == (16, 0, 0)


def test_against_a_provider_that_refuses_more_than_8_at_once_the_limit_settles_near_8() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=128, clock=clock)
    requests = refused = 0
    history = []
    for _ in range(300):
        busy = limit.limit
        requests += busy
        refused += max(0, busy - 8)
        busy_round(limit, clock, rate_limited=max(0, busy - 8))
        history.append(limit.limit)
    assert all(6 <= value <= 9 for value in history[-100:])
    assert refused / requests < 0.05


def test_each_model_has_its_own_limit() -> None:
    limits = ConcurrencyLimits(ceiling=64, clock=Clock())
    limits.of("fast").rate_limited(limits.of("fast").sent())
    assert (limits.of("fast").limit, limits.of("slow").limit) == (12, 16)
    assert limits.of("fast") is limits.of("fast")


class Started:
    """The turns that entered the gate, in order, and a way to wait until enough have."""

    def __init__(self) -> None:
        self.names: list[int] = []
        self._changed = asyncio.Condition()

    async def add(self, n: int) -> None:
        async with self._changed:
            self.names.append(n)
            self._changed.notify_all()

    async def reach(self, count: int) -> None:
        async with asyncio.timeout(5), self._changed:
            await self._changed.wait_for(lambda: len(self.names) >= count)


async def test_waiting_turns_take_the_slots_of_a_risen_limit_in_arrival_order() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=10, floor=1, initial=2, clock=clock)
    gate = TurnGate(limit=limit, queue=10)
    entered = Started()
    started = entered.names
    positions: list[int] = []
    release = asyncio.Event()

    async def turn(n: int) -> None:
        async def on_queued(position: int) -> None:
            positions.append(position)

        async with gate.admit(on_queued=on_queued):
            await entered.add(n)
            await release.wait()

    tasks = []
    for n in range(5):
        tasks.append(asyncio.create_task(turn(n)))
        await asyncio.sleep(0)
    assert started == [0, 1] and positions == [1, 2, 3]
    # Two answers while both slots are busy: the limit grows to 4, and the first two waiters enter.
    busy_round(limit, clock)
    assert limit.limit == 4
    await entered.reach(4)
    assert started == [0, 1, 2, 3] and gate.waiting == 1
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert started == [0, 1, 2, 3, 4] and (gate.running, gate.waiting) == (0, 0)


async def test_a_fallen_limit_lets_no_new_turn_in_until_fewer_run_than_it() -> None:
    clock = Clock()
    limit = AdaptiveLimit(ceiling=10, floor=1, initial=4, clock=clock)
    gate = TurnGate(limit=limit, queue=10)
    finish = [asyncio.Event() for _ in range(6)]
    entered = Started()
    started = entered.names

    async def turn(n: int) -> None:
        async with gate.admit():
            await entered.add(n)
            await finish[n].wait()

    tasks = []
    for n in range(6):
        tasks.append(asyncio.create_task(turn(n)))
        await asyncio.sleep(0)
    assert started == [0, 1, 2, 3]
    limit.rate_limited(limit.sent())
    limit.rate_limited(limit.sent())
    assert limit.limit == 2  # 4 → 3 → 2
    for n in (0, 1):
        finish[n].set()
    async with asyncio.timeout(5):
        await asyncio.gather(tasks[0], tasks[1])
    assert started == [0, 1, 2, 3] and gate.waiting == 2
    finish[2].set()
    await entered.reach(5)
    assert started == [0, 1, 2, 3, 4]
    for event in finish:
        event.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert (gate.running, gate.waiting) == (0, 0)


async def test_the_model_client_reports_a_429_and_an_answer_to_its_models_limit() -> None:
    limits = ConcurrencyLimits(ceiling=64, initial=20)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def progress(event: TurnEvent) -> None:
        pass

    async with FakeLLMServer([rate_limited("0"), reply("hi")]) as server:
        llm = OpenAILLM(
            model="m1",
            base_url=server.base_url,
            api_key=None,
            timeout=10,
            max_retries=2,
            sleep=sleep,
            limits=limits,
        )
        try:
            completion = await llm.complete([ChatMessage(role="user", content="hello")], [], progress)
        finally:
            await llm.aclose()
    assert completion.message.content == "hi"
    limit = limits.of("m1")
    assert (limit.cuts, limit.limit, limit.in_flight) == (1, 15, 0)
    assert limits.of("other").limit == 20


async def test_a_running_nerve_shares_one_limit_per_model_between_its_client_and_its_gate(tmp_path) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    async with FakeLLMServer([rate_limited("0"), reply("hi")]) as server:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            nerve_db=tmp_path / "nerve.db",
            nerve_mcp_config=tmp_path / "mcp.json",
            openai_base_url=server.base_url,
            nerve_model="m1",
            nerve_max_concurrent_turns=40,
            nerve_llm_max_retries=2,
        )
        async with asyncio.timeout(30), open_runtime(settings) as runtime:
            gate = runtime.agent.gate
            assert gate.limit == 16
            key = ConversationKey(platform="terminal", workspace="local", channel="local", thread="main")
            answer = await runtime.agent.reply(Incoming(key=key, text="hello", user_id="me"))
            assert answer.text == "hi"
            # The client's 429 cut the limit the gate lets turns in by.
            assert gate.limit == 12
            assert runtime.agent.limits is not None and runtime.agent.limits.ceiling == 40


async def test_the_offline_model_keeps_the_configured_number_of_turns(tmp_path) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        nerve_db=tmp_path / "nerve.db",
        nerve_mcp_config=tmp_path / "mcp.json",
        nerve_model="offline",
        nerve_max_concurrent_turns=40,
    )
    async with asyncio.timeout(30), open_runtime(settings) as runtime:
        assert runtime.agent.limits is None and runtime.agent.gate.limit == 40

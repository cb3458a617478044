"""The core benchmark scenarios: nerve's real agent next to the bare reference loop, in one run.

Every figure goes through the real parts: the `openai` client against a local model service on
127.0.0.1, MCP servers as stdio subprocesses, the SQLite store in a temporary folder, argument
validation and context building included. The same work is done by `bench.bare_loop` in the same
run (turn by turn, alternating where timing matters), so each figure is also a ratio to the bare
loop, which stays meaningful on a slow or busy machine.

Scenarios:

* W1 — the seed turn: two tools (300 ms and 200 ms) called in one model message, model latency
  50 ms: turn time ÷ the ideal 400 ms (the calls must overlap).
* W2 — per-turn overhead: a zero-cost tool, model latency 0; p50/p99 turn time ÷ the bare loop's.
  W2b is the same with budgets on (limits on the person, place and workspace, prices set), so every
  turn's budget check, reservation and settlement are in the figure.
* W3 — a 30-turn thread, each turn a tool returning about 5 KB of JSON: the size of the request on
  turn 30 and over the thread; the answer must still quote the latest result; the share of prompt
  tokens a provider's prefix cache would hold from turn 2 on. W3b alternates two
  such tools, so no result is replaced by a later one of the same tool and only the budget bounds it.
* W4 — 100 conversations at once, model latency 200 ms, the turn limit at its defaults: wall time ÷
  the bare loop's.
* W5 — 40 conversations × 10 turns against a model service that answers 429 beyond 8 requests at
  once: where the adaptive turn limit settles, and the share of requests answered 429.
* Start-up — store open plus every seed server connected and its tools listed.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from adapters.settings import PLATFORMS
from bench.bare_loop import BareLoop
from bench.payload_server import payload, report_id
from bot.agent import DEFAULT_SYSTEM_PROMPT, Agent, AgentConfig
from bot.budgets.rules import parse_budgets, parse_prices
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.mcp.servers_file import load_mcp_config
from bot.model.client import OpenAILLM
from bot.model.concurrency import ConcurrencyLimits
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, Incoming, ToolCall, ToolSpec
from tests.fakes.llm_server import (
    FakeCall,
    FakeLLMServer,
    HttpError,
    PromptCache,
    Reply,
    own_text,
    prompt_text,
    rate_limited,
)

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"
# A scenario that takes longer than this is stuck, not slow.
SCENARIO_TIMEOUT = 120.0

W1_TURNS = 10
W2_TURNS = 200
W2_THREAD_TURNS = 10
W3_TURNS = 30
W4_CONVERSATIONS = 100
# Seven waves a side, alternating which goes first: one wave is 1–2 s of a shared machine's time, and
# with three the median moved by a fifth between two runs of the same code.
W4_RUNS = 7
W5_CAPACITY = 8
W5_CONVERSATIONS = 40
W5_TURNS = 10
STARTUP_RUNS = 5
WARMUP_TURNS = 2


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One row of the results table: nerve's value, the bare loop's, and the goal it is held to."""

    scenario: str
    name: str
    core: float
    unit: str
    bare: float | None = None
    goal: str = ""
    passed: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.bare is None or self.bare == 0:
            return None
        return self.core / self.bare


@dataclass(slots=True)
class Results:
    figures: list[Figure] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of the samples at or below it."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def machine() -> dict[str, str]:
    """What the figures were measured on: they mean little without it."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "commit": commit or "unknown",
    }


# ------------------------------------------------------------------------------------ the fake model

Plan = Callable[[str], list[tuple[str, dict[str, Any]]]]
_REPORT_ID = re.compile(r'"report_id": "([A-Z]{3}-[0-9a-f]{12})"')


class BenchModel:
    """The model's behaviour for one scenario: call the planned tools, then answer from the results.

    A user message gets the tool calls `plan` picks for its text; tool results get a short answer
    that quotes the latest result's `report_id` (when it has one), so a benchmark can check the
    answer was built from the latest result and not from an older one.
    """

    def __init__(self, plan: Plan, latency: float) -> None:
        self._plan = plan
        self._latency = latency

    def __call__(self, body: dict[str, Any]) -> Reply:
        # No `usage` in the answers: nerve then trusts its own token estimate (scale 1), so the
        # budget figures do not hang on how crudely a fake would count tokens.
        messages: list[dict[str, Any]] = body["messages"]
        last = messages[-1]
        if last["role"] == "user":
            offered = [tool["function"]["name"] for tool in body.get("tools") or ()]
            calls = tuple(
                FakeCall(name=_offered_name(offered, name), arguments=json.dumps(args))
                for name, args in self._plan(own_text(last["content"]))
            )
            return Reply(tool_calls=calls, usage=None, delay=self._latency)
        found = _REPORT_ID.search(str(last.get("content") or ""))
        quoted = f" Latest report: {found.group(1)}." if found else ""
        text = f"Done: {len(_trailing_tool_messages(messages))} result(s).{quoted}"
        return Reply(content=text, usage=None, delay=self._latency)


class ModelSwitch:
    """One model service for several scenarios: each puts in its own behaviour before it starts."""

    def __init__(self) -> None:
        self.model: BenchModel | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.model is None:
            raise AssertionError("no scenario has set the model's behaviour")
        return self.model(body)


def _offered_name(offered: Sequence[str], wanted: str) -> str:
    """The name the model sees for a tool (the host may prefix it to keep names unique)."""
    for name in offered:
        if name == wanted or name.endswith(f"__{wanted}"):
            return name
    raise AssertionError(f"tool {wanted!r} is not offered; offered: {', '.join(offered)}")


def _trailing_tool_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        out.append(message)
    return out[::-1]


# ------------------------------------------------------------------------------------------ the parts


def seed_servers(env_delay_ms: int = 0, geo_delay_ms: int = 0) -> dict[str, ServerConfig]:
    """The seed servers exactly as `mcp.json` configures them, with the benchmark's call delays."""
    servers = load_mcp_config(ROOT / "mcp.json", platforms=PLATFORMS).servers
    delays = {
        "env-query": ("ENV_QUERY_DELAY_MS", env_delay_ms),
        "geo-simulator": ("GEO_SIMULATOR_DELAY_MS", geo_delay_ms),
    }
    out = {}
    for name, config in servers.items():
        variable, delay = delays[name]
        out[name] = config.model_copy(update={"env": {**config.env, variable: str(delay)}})
    return out


def payload_servers() -> dict[str, ServerConfig]:
    return {
        "payload": ServerConfig(
            trustAnnotations=True, command=sys.executable, args=["-m", "bench.payload_server"], cwd=str(ROOT)
        )
    }


def stdio_params(servers: dict[str, ServerConfig]) -> dict[str, StdioServerParameters]:
    """The same commands for the bare loop."""
    out = {}
    for name, config in servers.items():
        assert config.command is not None
        out[name] = StdioServerParameters(
            command=config.command, args=config.args, env=config.env, cwd=config.cwd
        )
    return out


@dataclass(slots=True)
class Rig:
    """nerve's agent and the bare loop, both pointed at one local model service and the same servers."""

    model: FakeLLMServer
    switch: ModelSwitch
    agent: Agent
    host: MCPHost
    bare: BareLoop
    store: SQLiteStore
    llm: OpenAILLM
    limits: ConcurrencyLimits
    turns: int = 0

    async def core_turn(self, thread: str, text: str, agent: Agent | None = None) -> str:
        self.turns += 1
        key = ConversationKey(platform="bench", workspace="bench", channel="bench", thread=thread)
        answer = await (agent or self.agent).reply(
            Incoming(key=key, text=text, user_id="u1", event_id=f"{thread}:{self.turns}")
        )
        return answer.text

    async def bare_turn(self, thread: str, text: str) -> str:
        return await self.bare.reply(thread, text)

    def behave(self, plan: Plan, latency: float) -> None:
        self.switch.model = BenchModel(plan, latency)

    def forget_requests(self) -> None:
        """Drop the model service's record of earlier requests (megabytes after W3)."""
        self.model.requests.clear()
        self.model.request_headers.clear()


@asynccontextmanager
async def rig(servers: dict[str, ServerConfig]) -> AsyncIterator[Rig]:
    """The agent and the bare loop over their own copies of `servers`, one model service, one store."""
    async with AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nerve-bench-")))
        switch = ModelSwitch()
        server = await stack.enter_async_context(FakeLLMServer(switch))
        store = await SQLiteStore.open(folder / "nerve.db")
        stack.push_async_callback(store.close)
        # The turn limit at its defaults, learnt from the model's answers as in a running bot.
        limits = ConcurrencyLimits(ceiling=AgentConfig().max_concurrent_turns)
        llm = OpenAILLM(
            model=MODEL, base_url=server.base_url, api_key=None, timeout=60.0, max_retries=0, limits=limits
        )
        stack.push_async_callback(llm.aclose)
        host = MCPHost(servers)
        bare = BareLoop(
            base_url=server.base_url,
            model=MODEL,
            system_prompt=DEFAULT_SYSTEM_PROMPT,
            servers=stdio_params(servers),
        )
        # Both sides start and stop their servers at the same time: each stop waits out the SDK's
        # grace period for the child to exit, and nothing here is measured.
        stack.push_async_callback(_close_both, host, bare)
        started = await asyncio.gather(host.start(), bare.__aenter__(), return_exceptions=True)
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        async with asyncio.timeout(30):
            await host.wait_for(lambda: not host.starting())
        if host.problems():
            raise RuntimeError(f"MCP servers did not start: {host.problems()}")
        agent = Agent(
            llm=llm, host=host, store=store, inbox=store, config=AgentConfig(model=MODEL), limits=limits
        )
        yield Rig(
            model=server,
            switch=switch,
            agent=agent,
            host=host,
            bare=bare,
            store=store,
            llm=llm,
            limits=limits,
        )


async def _close_both(host: MCPHost, bare: BareLoop) -> None:
    await asyncio.gather(host.aclose(), bare.__aexit__(None, None, None))


async def timed(call: Awaitable[str]) -> tuple[float, str]:
    started = time.perf_counter()
    text = await call
    return time.perf_counter() - started, text


# ------------------------------------------------------------------------------------------ scenarios


def _seed_plan(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("get_environment_status", {"area_code": "A1001"}),
        ("simulate_geolocation", {"lat": 31.2304, "lng": 121.4737, "radius": 500}),
    ]


W1_LATENCY, W1_SLOW_MS, W1_FAST_MS = 0.050, 300, 200


async def w1_seed_turn(results: Results, r: Rig) -> None:
    """Two slow tools in one model message: the turn should take barely more than the slowest path."""
    ideal = W1_LATENCY + W1_SLOW_MS / 1000 + W1_LATENCY
    r.behave(_seed_plan, W1_LATENCY)
    core: list[float] = []
    bare: list[float] = []
    for i in range(WARMUP_TURNS + W1_TURNS):
        text = "Is the air good for a run, and is there a park near 31.2304, 121.4737?"
        # Alternating which side goes first keeps a slow moment of the machine from landing on one side.
        if i % 2 == 0:
            core_time, core_text = await timed(r.core_turn(f"w1-{i}", text))
            bare_time, _ = await timed(r.bare_turn(f"w1-{i}", text))
        else:
            bare_time, _ = await timed(r.bare_turn(f"w1-{i}", text))
            core_time, core_text = await timed(r.core_turn(f"w1-{i}", text))
        if "2 result(s)" not in core_text:
            raise AssertionError(f"W1: nerve did not answer from both results: {core_text!r}")
        if i >= WARMUP_TURNS:
            core.append(core_time)
            bare.append(bare_time)
    core_ratio = statistics.median(core) / ideal
    bare_ratio = statistics.median(bare) / ideal
    core_ms, bare_ms = statistics.median(core) * 1000, statistics.median(bare) * 1000
    results.details["W1"] = {"ideal_s": ideal, "core_s": core, "bare_s": bare}
    results.add(
        Figure(
            scenario="W1",
            name="seed turn ÷ ideal 400 ms (median)",
            core=core_ratio,
            bare=bare_ratio,
            unit="×",
            goal="≤ 1.04",
            passed=core_ratio <= 1.04,
            note=f"turn {core_ms:.0f} ms, bare {bare_ms:.0f} ms",
        )
    )


def _echo_plan(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [("echo", {"text": text})]


async def w2_overhead(results: Results, r: Rig) -> None:
    """A free tool and an instant model: what is left of a turn is the bot's own work."""
    await _w2_turns(results, r, "W2", r.agent, "nerve streams, the bare loop does not")


# Limits on the person, the place and the workspace, in tokens and in money (as NERVE_BUDGETS and
# NERVE_PRICES set them), far above what the bench uses: every turn's first request is checked and
# reserved, and settled with its answer, and no turn is refused.
W2B_BUDGETS = json.dumps(
    {
        "person": {"day": {"tokens": 1_000_000_000}, "month": {"money": 1_000_000}},
        "place": {"day": {"tokens": 1_000_000_000}},
        "workspace": {"month": {"money": 1_000_000}},
    }
)
W2B_PRICES = json.dumps({MODEL: {"prompt": 0.15, "cached": 0.075, "completion": 0.6}})


async def w2b_budgets(results: Results, r: Rig) -> None:
    """W2 with budgets on: the check, reservation and settlement run on every model request."""
    config = AgentConfig(model=MODEL, budgets=parse_budgets(W2B_BUDGETS), prices=parse_prices(W2B_PRICES))
    agent = Agent(llm=r.llm, host=r.host, store=r.store, inbox=r.store, config=config, limits=r.limits)
    await _w2_turns(results, r, "W2b", agent, "budgets on; nerve streams, the bare loop does not")


async def _w2_turns(results: Results, r: Rig, label: str, agent: Agent, about: str) -> None:
    r.behave(_echo_plan, 0.0)
    core: list[float] = []
    bare: list[float] = []

    async def core_turn(thread: str, text: str) -> str:
        return await r.core_turn(thread, text, agent)

    for i in range(WARMUP_TURNS + W2_TURNS):
        thread = f"{label.lower()}-{i // W2_THREAD_TURNS}"
        text = f"Say back turn {i}."
        # Alternating keeps a slow moment of the machine from landing on one side only.
        first, second = (core_turn, r.bare_turn) if i % 2 == 0 else (r.bare_turn, core_turn)
        t1, _ = await timed(first(thread, text))
        t2, _ = await timed(second(thread, text))
        core_time, bare_time = (t1, t2) if i % 2 == 0 else (t2, t1)
        if i >= WARMUP_TURNS:
            core.append(core_time)
            bare.append(bare_time)
    results.details[label] = {"core_s": core, "bare_s": bare}
    for q in (50, 99):
        c, b = percentile(core, q), percentile(bare, q)
        results.add(
            Figure(
                scenario=label,
                name=f"turn time p{q}, zero-cost tool, instant model",
                core=c * 1000,
                bare=b * 1000,
                unit="ms",
                goal="≤ 1.1 × bare",
                passed=c <= 1.1 * b,
                note=f"nerve adds {(c - b) * 1000:.1f} ms; {about}",
            )
        )


def request_bytes(server: FakeLLMServer, index: int) -> int:
    headers = {k.lower(): v for k, v in server.request_headers[index].items()}
    if "content-length" in headers:
        return int(headers["content-length"])
    return len(json.dumps(server.requests[index]).encode())


def request_tokens(body: dict[str, Any]) -> int:
    """nerve's own offline estimate, applied to whatever was sent (nerve's or the bare loop's request)."""
    messages = [
        ChatMessage(
            role=m["role"],
            content=m.get("content"),
            tool_calls=tuple(
                ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                for c in m.get("tool_calls") or ()
            ),
            tool_call_id=m.get("tool_call_id"),
        )
        for m in body["messages"]
    ]
    tools = [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description") or "",
            parameters=t["function"].get("parameters") or {},
            server="",
            original_name="",
        )
        for t in body.get("tools") or ()
    ]
    return estimate_message_tokens(messages) + estimate_tools_tokens(tools)


def _latest_result_intact(body: dict[str, Any], expected: dict[str, Any]) -> bool:
    """True when the request's last tool message carries the expected JSON whole (after any label)."""
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if not tools:
        return False
    content = str(tools[-1].get("content") or "")
    start = content.find("{")
    if start < 0:
        return False
    try:
        return bool(json.loads(content[start:]) == expected)
    except json.JSONDecodeError:
        return False


def _payload_plan(alternate: bool) -> Plan:
    def plan(text: str) -> list[tuple[str, dict[str, Any]]]:
        kind, query = text.split(" ", 1)
        return [("fetch_listing" if kind == "listing" else "fetch_report", {"query": query})]

    return plan


async def w3_long_thread(results: Results, r: Rig, *, alternate: bool) -> None:
    """A long thread of big results: what does the request on turn 30 weigh, and is it still right?"""
    label = "W3b" if alternate else "W3"
    r.behave(_payload_plan(alternate), 0.0)
    sides: dict[str, dict[str, Any]] = {}
    # The bare loop sends everything either way (W3 shows it); W3b is about nerve's budget alone.
    runs = [("core", r.core_turn)] if alternate else [("core", r.core_turn), ("bare", r.bare_turn)]
    for side, turn in runs:
        first = len(r.model.requests)
        # A provider's prompt cache, for this side's requests alone (the other side's are not its).
        r.model.prompt_cache = PromptCache()
        cached_from = len(r.model.cached)
        answer = ""
        kind, query = "report", ""
        for i in range(1, W3_TURNS + 1):
            kind = "listing" if alternate and i % 2 == 0 else "report"
            query = f"q{i} {side}"
            answer = await turn(f"{label}-{side}", f"{kind} {query}")
        r.model.prompt_cache = None
        indexes = range(first, len(r.model.requests))
        last = indexes[-1]
        body = r.model.requests[last]
        # From the second turn on (turn 1 makes two requests: the tool call and the answer).
        cached, prompts = r.model.cached[cached_from + 2 :], r.model.prompts[cached_from + 2 :]
        sides[side] = {
            "turn30_bytes": request_bytes(r.model, last),
            "turn30_tokens": request_tokens(body),
            "thread_bytes": sum(request_bytes(r.model, i) for i in indexes),
            "thread_tokens": sum(request_tokens(r.model.requests[i]) for i in indexes),
            "requests": len(indexes),
            "latest_intact": _latest_result_intact(body, payload(kind, query)),
            "answer_quotes_latest": report_id(kind, query) in answer,
            "cached_share": sum(cached) / max(1, sum(prompts)),
            # What a provider must read anew is what each request added to the one before (the new
            # question, call, result and answer); sending more than that uncached is the waste.
            "uncached_over_new": (sum(prompts) - sum(cached)) / max(1, _new_tokens(r.model, indexes)),
            "least_cached_share": min(
                (c / max(1, p) for c, p in zip(cached, prompts, strict=True)), default=0.0
            ),
        }
    results.details[label] = sides
    core = sides["core"]
    bare = sides.get("bare", {})
    correct = core["latest_intact"] and core["answer_quotes_latest"]
    what = "alternating two 5 KB tools" if alternate else "one 5 KB tool each turn"
    results.add(
        Figure(
            scenario=label,
            name=f"turn-30 request, {what}",
            core=core["turn30_bytes"] / 1000,
            bare=bare["turn30_bytes"] / 1000 if bare else None,
            unit="KB",
            goal="≤ 45 KB, latest result intact",
            passed=core["turn30_bytes"] <= 45_000 and correct,
            note=(
                f"latest result intact: {'yes' if core['latest_intact'] else 'NO'}; "
                f"answer quotes it: {'yes' if core['answer_quotes_latest'] else 'NO'}"
            ),
        )
    )
    results.add(
        Figure(
            scenario=label,
            name="prompt tokens a provider's cache holds, turns 2–30",
            core=core["cached_share"] * 100,
            bare=bare["cached_share"] * 100 if bare else None,
            unit="%",
            goal="≥ 90 %",
            passed=core["cached_share"] >= 0.9,
            note=f"least of one request: {core['least_cached_share'] * 100:.1f} %",
        )
    )
    results.add(
        Figure(
            scenario=label,
            name="prompt tokens sent uncached, turns 2–30, ÷ what each request added",
            core=core["uncached_over_new"],
            bare=bare["uncached_over_new"] if bare else None,
            unit="×",
            # W3b is bounded by compression, which must rewrite the request it shortens.
            goal="" if alternate else "≤ 1.1",
            passed=None if alternate else core["uncached_over_new"] <= 1.1,
            note="1.0: a provider reads nothing twice",
        )
    )
    results.add(
        Figure(
            scenario=label,
            name="turn-30 request, estimated tokens",
            core=core["turn30_tokens"],
            bare=bare["turn30_tokens"] if bare else None,
            unit="tokens",
        )
    )
    results.add(
        Figure(
            scenario=label,
            name=f"whole thread ({core['requests']} requests), bytes sent",
            core=core["thread_bytes"] / 1000,
            bare=bare["thread_bytes"] / 1000 if bare else None,
            unit="KB",
        )
    )
    results.add(
        Figure(
            scenario=label,
            name="whole thread, estimated tokens",
            core=core["thread_tokens"],
            bare=bare["thread_tokens"] if bare else None,
            unit="tokens",
        )
    )


def _new_tokens(server: FakeLLMServer, indexes: range) -> int:
    """The fake provider's tokens of what each request from the second turn on added to the one
    before it (turn 1's two requests are left out, as in the cached share)."""
    requests = [server.requests[i] for i in indexes]
    added = [
        prompt_text({"messages": after["messages"][len(before["messages"]) :]})
        for before, after in itertools.pairwise(requests)
    ]
    return sum(len(text) // 4 for text in added[1:])


async def w4_concurrency(results: Results, r: Rig) -> None:
    """Many conversations at once through one host (one MCP session) and one store: no queue forms."""
    latency = 0.200
    r.behave(_echo_plan, latency)

    async def wave(side: str, run: int, conversations: int = W4_CONVERSATIONS) -> float:
        turn = r.core_turn if side == "core" else r.bare_turn
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(turn(f"w4-{side}-{run}-{n}", f"Say back {n}.") for n in range(conversations))
        )
        elapsed = time.perf_counter() - started
        if side == "core" and not all("1 result(s)" in a for a in answers):
            raise AssertionError("W4: some conversations did not finish with their tool result")
        return elapsed

    await wave("core", -1, 10)  # warm-up: connections, caches, lazy imports
    await wave("bare", -1, 10)
    core: list[float] = []
    bare: list[float] = []
    for run in range(W4_RUNS):
        order = ("core", "bare") if run % 2 == 0 else ("bare", "core")
        for side in order:
            (core if side == "core" else bare).append(await wave(side, run))
    c, b = statistics.median(core), statistics.median(bare)
    limit = r.agent.gate.limit
    results.details["W4"] = {"core_s": core, "bare_s": bare, "ideal_s": 2 * latency, "limit_after": limit}
    results.add(
        Figure(
            scenario="W4",
            name=f"{W4_CONVERSATIONS} conversations at once, wall time (median of {W4_RUNS})",
            core=c * 1000,
            bare=b * 1000,
            unit="ms",
            goal="≤ 1.1 × bare",
            passed=c <= 1.1 * b,
            note=f"ideal {2 * latency * 1000:.0f} ms; turn limit at its defaults, {limit} after",
        )
    )
    # The first burst meets the limit where the warm-up left it: it grows as the answers come.
    results.add(
        Figure(
            scenario="W4",
            name=f"{W4_CONVERSATIONS} conversations at once, first burst",
            core=core[0] * 1000,
            bare=bare[0] * 1000,
            unit="ms",
        )
    )


class CrowdedModel:
    """A model service that answers 429 to any request beyond `capacity` at once (with a wait of
    `retry_ms`, as OpenAI says it), and otherwise like `BenchModel` after `latency`."""

    def __init__(self, model: BenchModel, *, capacity: int, latency: float, retry_ms: int) -> None:
        self._model, self._capacity, self._latency, self._retry_ms = model, capacity, latency, retry_ms
        self.at_once = 0
        self.requests = 0
        self.refused = 0

    async def __call__(self, body: dict[str, Any]) -> Reply | HttpError:
        self.requests += 1
        if self.at_once >= self._capacity:
            self.refused += 1
            return rate_limited(None, headers={"retry-after-ms": str(self._retry_ms)})
        self.at_once += 1
        try:
            await asyncio.sleep(self._latency)
            return self._model(body)
        finally:
            self.at_once -= 1


async def w5_rate_limited(results: Results, r: Rig) -> None:
    """A provider that takes 8 requests at once and answers 429 beyond: the limit learns it."""
    crowded = CrowdedModel(BenchModel(_echo_plan, 0.0), capacity=W5_CAPACITY, latency=0.1, retry_ms=200)
    limits = ConcurrencyLimits(ceiling=AgentConfig().max_concurrent_turns)
    async with FakeLLMServer(crowded) as server:
        llm = OpenAILLM(
            model=MODEL, base_url=server.base_url, api_key=None, timeout=60.0, max_retries=8, limits=limits
        )
        agent = Agent(
            llm=llm, host=r.host, store=r.store, inbox=r.store, config=AgentConfig(model=MODEL), limits=limits
        )
        limit = limits.of(MODEL)
        seen: list[int] = []

        async def conversation(n: int) -> None:
            key = ConversationKey(platform="bench", workspace="bench", channel="w5", thread=f"w5-{n}")
            for k in range(W5_TURNS):
                text = f"Say back {n}.{k}."
                answer = await agent.reply(Incoming(key=key, text=text, user_id="u1", event_id=f"w5-{n}-{k}"))
                if "1 result(s)" not in answer.text:
                    raise AssertionError(f"W5: a turn did not finish with its tool result: {answer.text!r}")

        async def watch() -> None:
            while True:
                seen.append(limit.limit)
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        started = time.perf_counter()
        try:
            await asyncio.gather(*(conversation(n) for n in range(W5_CONVERSATIONS)))
        finally:
            watcher.cancel()
            await llm.aclose()
        wall = time.perf_counter() - started
    settled = seen[len(seen) // 2 :]
    share = crowded.refused / max(1, crowded.requests)
    middle = statistics.median(settled)
    results.details["W5"] = {"limits_seen": seen, "requests": crowded.requests, "refused": crowded.refused}
    results.add(
        Figure(
            scenario="W5",
            name=f"turn limit against a provider taking {W5_CAPACITY} at once (median of the second half)",
            core=middle,
            unit="turns",
            goal=f"near {W5_CAPACITY} (6–10)",
            passed=6 <= middle <= 10,
            note=f"{min(settled)}–{max(settled)} in the second half; {limit.cuts} cuts; {wall:.1f} s",
        )
    )
    results.add(
        Figure(
            scenario="W5",
            name=f"429s, {W5_CONVERSATIONS} conversations × {W5_TURNS} turns",
            core=share * 100,
            unit="%",
            goal="< 5 %",
            passed=share < 0.05,
            note=f"{crowded.refused} of {crowded.requests} requests",
        )
    )


async def startup(results: Results) -> None:
    """From nothing to ready: the store open, both seed servers connected and their tools listed."""
    core: list[float] = []
    bare: list[float] = []
    servers = seed_servers()
    # Stopping a stdio server waits for the child to exit (about 2 s, mostly idle): those waits run in
    # the background while the next start is measured, and are all awaited at the end.
    closing: list[asyncio.Task[None]] = []
    with tempfile.TemporaryDirectory(prefix="nerve-bench-") as folder:
        try:
            for run in range(STARTUP_RUNS):
                # Alternating which side starts first spreads any drift of the machine over both.
                for side in ("core", "bare") if run % 2 == 0 else ("bare", "core"):
                    if side == "core":
                        elapsed, close = await _core_startup(servers, Path(folder) / f"start-{run}.db")
                        core.append(elapsed)
                    else:
                        elapsed, close = await _bare_startup(servers)
                        bare.append(elapsed)
                    closing.append(asyncio.create_task(close()))
        finally:
            await asyncio.gather(*closing)
    c, b = statistics.median(core), statistics.median(bare)
    results.details["startup"] = {"core_s": core, "bare_s": bare}
    results.add(
        Figure(
            scenario="Start-up",
            name=f"time to ready, two seed servers + store (median of {STARTUP_RUNS})",
            core=c * 1000,
            bare=b * 1000,
            unit="ms",
            goal="≤ 1500 ms",
            passed=c <= 1.5,
        )
    )


Close = Callable[[], Coroutine[Any, Any, None]]


async def _core_startup(servers: dict[str, ServerConfig], db: Path) -> tuple[float, Close]:
    started = time.perf_counter()
    store = await SQLiteStore.open(db)
    host = MCPHost(servers)

    async def close() -> None:
        await asyncio.gather(host.aclose(), store.close())

    try:
        await host.start()
        async with asyncio.timeout(30):
            await host.wait_for(lambda: not host.starting())
        elapsed = time.perf_counter() - started
        if host.problems() or len(host.list_tools()) != len(servers):
            raise AssertionError(f"start-up: servers not ready: {host.problems()}")
    except BaseException:
        await close()
        raise
    return elapsed, close


async def _bare_startup(servers: dict[str, ServerConfig]) -> tuple[float, Close]:
    started = time.perf_counter()
    loop = BareLoop(
        base_url="http://127.0.0.1:9/v1", model=MODEL, system_prompt="", servers=stdio_params(servers)
    )
    await loop.__aenter__()
    elapsed = time.perf_counter() - started

    async def close() -> None:
        await loop.__aexit__(None, None, None)

    return elapsed, close


async def _w3(results: Results, r: Rig) -> None:
    await w3_long_thread(results, r, alternate=False)


async def _w3b(results: Results, r: Rig) -> None:
    await w3_long_thread(results, r, alternate=True)


# Scenarios in run order, grouped by the servers they need: each group shares one rig, since
# starting and stopping MCP servers costs seconds that measure nothing.
RIGS: dict[str, Callable[[], dict[str, ServerConfig]]] = {
    "seeds-delayed": lambda: seed_servers(W1_SLOW_MS, W1_FAST_MS),
    "payload": payload_servers,
}
SCENARIOS: dict[str, tuple[str | None, Callable[..., Awaitable[None]]]] = {
    "startup": (None, startup),
    "W1": ("seeds-delayed", w1_seed_turn),
    "W2": ("payload", w2_overhead),
    "W2b": ("payload", w2b_budgets),
    "W3": ("payload", _w3),
    "W3b": ("payload", _w3b),
    "W4": ("payload", w4_concurrency),
    "W5": ("payload", w5_rate_limited),
}


# ------------------------------------------------------------------------------------------ output


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "×":
        return f"{value:.3f}"
    if unit == "tokens":
        return f"{value:,.0f}"
    if unit == "KB":
        return f"{value:.1f} KB"
    return f"{value:.1f} {unit}"


def table(figures: Sequence[Figure]) -> list[list[str]]:
    """Rows of the results table (header first), for the terminal and for RESULTS.md alike."""
    rows = [["scenario", "figure", "nerve", "bare loop", "nerve ÷ bare", "goal", "result"]]
    for f in figures:
        ratio = f.ratio
        verdict = "—" if f.passed is None else ("pass" if f.passed else "MISS")
        rows.append(
            [
                f.scenario,
                f.name + (f" ({f.note})" if f.note else ""),
                format_value(f.core, f.unit),
                format_value(f.bare, f.unit),
                "—" if ratio is None else f"{ratio:.2f}",
                f.goal or "—",
                verdict,
            ]
        )
    return rows


def print_table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


async def run(only: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the scenarios (all, or those named), print the table, and return figures and raw data."""
    results = Results()
    info = machine()
    print(
        f"core benchmarks: {info['cpu']}, {info['nproc']} CPUs, Python {info['python']}, {info['date']}",
        flush=True,
    )
    chosen = [name for name in SCENARIOS if not only or name in only]
    async with AsyncExitStack() as stack:
        rigs: dict[str, Rig] = {}
        for name in chosen:
            kind, scenario = SCENARIOS[name]
            started = time.perf_counter()
            async with asyncio.timeout(SCENARIO_TIMEOUT):
                if kind is None:
                    await scenario(results)
                else:
                    if kind not in rigs:
                        # The previous rig is closed before the next opens: no later scenario needs it.
                        await stack.aclose()
                        rigs = {kind: await stack.enter_async_context(rig(RIGS[kind]()))}
                    rigs[kind].forget_requests()
                    # Earlier scenarios' garbage is collected now, not during the next one's timings.
                    gc.collect()
                    await scenario(results, rigs[kind])
            print(f"  {name} done in {time.perf_counter() - started:.1f} s", flush=True)
    rows = table(results.figures)
    print()
    print_table(rows)
    return {
        "machine": info,
        "figures": [asdict(f) | {"ratio": f.ratio} for f in results.figures],
        "rows": rows,
        "details": results.details,
        "passed": all(f.passed is not False for f in results.figures),
    }

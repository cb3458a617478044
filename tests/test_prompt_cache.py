"""Requests a provider's prompt cache can keep: what is the same for every turn comes first and stays
byte-identical; what changes (the time now, the person's memories) ends the request."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from adapters.settings import PLATFORMS
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.model.client import OpenAILLM
from bot.policy.scopes import Place
from bot.store.base import ConversationStore
from bot.text.turn_note import MARK, split_note
from bot.types import ConversationKey, Incoming
from tests.conftest import stdio_server
from tests.fakes.clock import Clock
from tests.fakes.llm_server import (
    FakeCall,
    FakeLLMServer,
    Reply,
    own_text,
    prompt_text,
    reply,
    told,
    tool_reply,
)

ALICE = "U1ALICE"
CHANNEL = "CGENERAL"
NOW = datetime(2026, 12, 7, 8, 0, tzinfo=UTC).timestamp()
TURNS = 30


def asked(text: str, thread: str = "5.5") -> Incoming:
    return Incoming(
        key=ConversationKey(platform="slack", workspace="T1", channel=CHANNEL, thread=thread),
        text=text,
        user_id=ALICE,
        place=Place(platform="slack", channel=CHANNEL, user=ALICE),
    )


@pytest.fixture(scope="module")
async def no_servers() -> Any:
    async with MCPHost({}, default_timeout=5.0) as host:
        yield host


@pytest.fixture(scope="module")
async def payload_host() -> Any:
    """A server whose tools return about 5 KB of JSON a call, as a search or a database does."""
    async with MCPHost({"payload": stdio_server("bench.payload_server")}, default_timeout=10.0) as host:
        yield host


async def remembered(store: ConversationStore) -> None:
    """A fact of the place's and one of the person's, as people asked them kept."""
    for kind, subject, text in (
        ("place", f"slack:{CHANNEL}", "the staging server is staging.example.com"),
        ("person", f"slack:T1:{ALICE}", "my team is Falcon"),
    ):
        await store.add_memory(
            kind=kind,
            subject=subject,
            text=text,
            anywhere=kind == "person",  # a person's fact said where others read it
            written_by=f"slack:T1:{ALICE}",
            written_in=f"slack:{CHANNEL}",
        )


async def conversation(
    store: ConversationStore, host: MCPHost, turns: int
) -> tuple[FakeLLMServer, list[str], Agent]:
    """`turns` questions in one thread, a minute and a second apart, answered by a prompt-caching fake."""
    clock = Clock(NOW)

    def answer(body: dict[str, Any]) -> Reply:
        return reply(f"answer {len([m for m in body['messages'] if m['role'] == 'user'])}")

    async with FakeLLMServer(answer, prompt_cache=True) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)
        bot = Agent(
            llm=llm,
            host=host,
            store=store,
            inbox=store,
            approvals=store,
            memories=store,
            schedules=store,
            clock=clock,
            config=AgentConfig(platforms=PLATFORMS, schedules_run_on=frozenset({"slack"})),
        )
        texts = []
        try:
            for n in range(1, turns + 1):
                texts.append((await bot.reply(asked(f"question {n}: what is new on staging?"))).text)
                clock.now += 61
        finally:
            await llm.aclose()
    return server, texts, bot


async def test_a_30_turn_conversations_requests_each_start_with_the_whole_request_before_it(
    store: ConversationStore, no_servers: MCPHost
) -> None:
    await remembered(store)
    server, texts, _ = await conversation(store, no_servers, TURNS)

    assert texts[-1] == f"answer {TURNS}"
    requests = server.requests
    assert len(requests) == TURNS
    # The model is told the time, the place's and the person's memories every turn…
    for n, request in enumerate(requests):
        said = told(request)
        assert f"The current time is 2026-12-07T{8 + (61 * n) // 3600:02d}:" in said
        assert "staging.example.com" in said and "my team is Falcon" in said
    # …but the system prompt (with the place's memory) and the tools never change…
    assert len({json.dumps(r["messages"][0]) for r in requests}) == 1
    assert len({json.dumps(r["tools"]) for r in requests}) == 1
    assert "my team is Falcon" not in requests[0]["messages"][0]["content"]
    assert "The current time" not in requests[0]["messages"][0]["content"]
    # …and each request starts with every message of the one before, but for its last (the turn's
    # own, which alone carries the note) up to where the note began.
    for before, after in itertools.pairwise(requests):
        *kept, last = before["messages"]
        assert after["messages"][: len(kept)] == kept
        assert after["messages"][len(kept)]["content"] == own_text(last["content"])
    # So the fake provider's cache holds most of every prompt from the second turn on.
    shares = [round(cached / whole, 3) for cached, whole in zip(server.cached, server.prompts, strict=True)]
    # (Only the note, the new question and the last answer are new: short ones here, so the share is
    # lower than with tool results; the W3 bench measures that.)
    assert shares[0] == 0 and all(share >= 0.85 for share in shares[1:]), shares
    assert shares[1:] == sorted(shares[1:]), "the conversation grows, its cached share with it"


async def test_the_turns_note_is_sent_never_stored(store: ConversationStore, no_servers: MCPHost) -> None:
    await remembered(store)
    server, _, bot = await conversation(store, no_servers, 2)

    history = await store.history(asked("").key)
    assert [m.content for m in history if m.role == "user"] == [
        "question 1: what is new on staging?",
        "question 2: what is new on staging?",
    ]
    assert "my team is Falcon" in server.requests[1]["messages"][-1]["content"]
    assert bot.limits is None, "a model client given no limits leaves the configured number fixed"


async def test_the_tools_are_sent_in_order_of_their_names(
    store: ConversationStore, no_servers: MCPHost
) -> None:
    server, _, _ = await conversation(store, no_servers, 1)

    names = [tool["function"]["name"] for tool in server.requests[0]["tools"]]
    assert names == sorted(names) and len(names) > 3


async def test_the_fake_provider_reports_the_longest_prefix_it_has_seen_as_cached() -> None:
    def answer(body: dict[str, Any]) -> Reply:
        return reply("ok")

    first = [{"role": "system", "content": "S" * 400}, {"role": "user", "content": "one"}]
    second = [*first[:1], {"role": "user", "content": "two"}]
    usages: dict[str, list[dict[str, Any]]] = {"cached": [], "plain": []}
    async with (
        FakeLLMServer(answer, prompt_cache=True) as cached,
        FakeLLMServer(answer) as plain,
        aiohttp.ClientSession() as http,
    ):
        for name, server in (("cached", cached), ("plain", plain)):
            for messages in (first, second):
                body = {"model": "m", "messages": messages}
                async with http.post(f"{server.base_url}/chat/completions", json=body) as response:
                    usages[name].append((await response.json())["usage"])
    # The tools ("[]": none), the system message whole, the user message up to its own text.
    shared = len('[]\n{"role": "system", "content": "' + "S" * 400 + '"}\n{"role": "user", "content": "')
    assert [u["prompt_tokens_details"]["cached_tokens"] for u in usages["cached"]] == [0, shared // 4]
    assert cached.cached == [0, shared // 4]
    assert all("prompt_tokens_details" not in u for u in usages["plain"]) and plain.cached == []


REPORT_ID = re.compile(r'"report_id": "(REP-[0-9a-f]{12})"')
# What an earlier turn of a thread of 5 KB results adds to each request: its question, call, answer,
# and its result replaced by a later call of the tool.
TURN_BYTES = 2_000


def report(body: dict[str, Any]) -> Reply:
    """A model that fetches the report a question names, then quotes the result's id."""
    last = body["messages"][-1]
    if last["role"] == "user":
        name = next(t["function"]["name"] for t in body["tools"] if "fetch_report" in t["function"]["name"])
        query = own_text(last["content"]).removeprefix("report ")
        return tool_reply(FakeCall(name=name, arguments=json.dumps({"query": query})))
    found = REPORT_ID.search(last["content"])
    return reply(f"Latest report: {found.group(1) if found else 'none'}.")


async def reports(store: ConversationStore, host: MCPHost, *, noted: bool, thread: str) -> FakeLLMServer:
    """The core bench's W3: each of 30 turns calls a tool returning about 5 KB of JSON. `noted`: the
    turn's note is on (the time now, as when schedules are offered, and a memory of the person's)."""
    clock = Clock(NOW)
    if noted:
        await remembered(store)
    async with FakeLLMServer(report, prompt_cache=True) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=10.0, max_retries=0)
        extra: dict[str, Any] = {"memories": store, "schedules": store, "approvals": store} if noted else {}
        runs_on = frozenset({"slack"}) if noted else frozenset()
        config = AgentConfig(platforms=PLATFORMS, schedules_run_on=runs_on)
        bot = Agent(llm=llm, host=host, store=store, inbox=store, clock=clock, config=config, **extra)
        try:
            for n in range(1, TURNS + 1):
                said = (await bot.reply(asked(f"report q{n}", thread=thread))).text
                clock.now += 61
        finally:
            await llm.aclose()
    last = server.requests[-1]["messages"][-1]["content"]
    assert '"query": "q30"' in last and REPORT_ID.search(last) and said.startswith("Latest report: REP-")
    return server


def note_of_body(body: dict[str, Any]) -> str:
    """The turn's note a request carries (it ends its last message)."""
    return split_note(body["messages"][-1]["content"])[1]


def uncached(server: FakeLLMServer) -> int:
    """Prompt tokens sent uncached from the second turn on (turn 1, two requests, has nothing to share)."""
    return sum(server.prompts[2:]) - sum(server.cached[2:])


@pytest.mark.parametrize("noted", [False, True], ids=["plain", "noted"])
async def test_a_thread_of_big_tool_results_sends_uncached_little_more_than_what_is_new(
    store: ConversationStore, payload_host: MCPHost, noted: bool
) -> None:
    """What a thread costs is its uncached tokens, then its cached ones. The floor is what each request
    adds to the one before (the new call and its result; the answer and the new question): only that
    is new to a provider. Replacing a superseded result rewrites the request from it on, which adds
    only its short marker, so the thread stays near the floor; a request that changed an earlier
    message every turn (a note left on the turn's message) sent the 5 KB result after it again."""
    server = await reports(store, payload_host, noted=noted, thread="w3")

    requests = server.requests
    new = [
        prompt_text({"messages": after["messages"][len(before["messages"]) :]})
        for before, after in itertools.pairwise(requests)
    ]
    floor = sum(len(text) // 4 for text in new[1:])
    assert floor <= uncached(server) <= floor * 1.1, (uncached(server), floor)
    # The latest result whole, earlier ones replaced at once: a turn adds to the requests after it
    # only its question, call, marker and answer, so the thread's prompt tokens are bounded by the
    # bytes of a growing series (keeping superseded results whole for a while sent half as much again).
    sizes = [len(prompt_text(request)) for request in requests]
    bounds = [sizes[1] + (n // 2) * TURN_BYTES for n in range(len(sizes))]
    assert all(size <= bound for size, bound in zip(sizes, bounds, strict=True)), sizes
    assert sum(server.prompts) <= sum(bounds) // 4


async def test_the_turns_note_costs_a_thread_of_big_results_no_uncached_tokens_but_its_own(
    store: ConversationStore, payload_host: MCPHost
) -> None:
    """The note ends each request, so the next one starts with everything before it: were it left on
    the turn's message, each next request would differ there, and the 5 KB result after it would be
    sent uncached again in every turn."""
    plain = await reports(store, payload_host, noted=False, thread="plain")
    noted = await reports(store, payload_host, noted=True, thread="noted")

    assert "The current time is" in told(noted.requests[-1]) and "my team is Falcon" in told(
        noted.requests[-1]
    )
    assert "The current time is" not in told(plain.requests[-1])
    # Each request's own note is new to the provider (the time changes each turn): beyond it, the
    # thread sends uncached what the same thread without a note does.
    notes = sum(len(json.dumps(MARK + note_of_body(request))) // 4 for request in noted.requests[2:])
    assert uncached(noted) - notes <= uncached(plain) * 1.05, (uncached(noted), notes, uncached(plain))
    assert uncached(noted) <= uncached(plain) * 1.15, (uncached(noted), uncached(plain))

"""Fuzzed tool arguments: nothing the model writes crashes nerve, and nothing invalid reaches a server.

The model is not trusted to follow a schema: whatever it sends as a call's arguments (any JSON, cut
JSON, no JSON, NaN, lone surrogates, keys the schema forbids, numbers as strings) is either turned
into arguments that satisfy the tool's schema or refused with a problem the model can act on.

1. The checks alone (`parse_arguments`), 1,000 cases over strict schemas: an accepted value must
   satisfy the schema by jsonschema's own reading, and be JSON a server can take.
2. The whole path, 1,000 more cases: the real `openai` client against the local model service, the
   agent and its store, and the recorder server as a real stdio subprocess, which validates every
   call against the schema it declared and writes down what it got. It must never get an invalid one.

Derandomized: the same cases on every run, so a failure reproduces.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.turn.guards import parse_arguments
from bot.types import ConversationKey, Incoming, ToolSpec
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, reply, tool_reply
from tests.mcp_servers.recorder import SCHEMAS

CASES = 1000
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    # Nothing is written to disk: the same cases run every time anyway.
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

KEYS = sorted(
    {"code", "count", "unit", "value", "ratio", "flags", "label", "filter", "field", "op", "values"}
    | {"limit", "at", "x", "y", "target", "kind", "extra"}
)
TRICKY = ["12", " 3 ", "1e3", "true", "FALSE", "-0", "0x10", "１２", "NaN", "", "m", "km", "eq", "pin"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(TRICKY),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=10,
)
objects = st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), values, max_size=5)
ODD = [
    '{"value": NaN}',
    '{"value": Infinity, "ratio": -Infinity}',
    '{"code": "A", "code": "B"}',
    '{"code": "\\ud800"}',
    '{"at": {"x": 1e400, "y": 0}}',
    '{"filter": ' + "[" * 80 + "]" * 80 + "}",
    "null",
    "[]",
    "",
    "   ",
]
raw_arguments = st.one_of(
    objects.map(json.dumps),
    values.map(json.dumps),
    st.text(max_size=40),
    objects.map(lambda o: json.dumps(o)[: max(1, len(json.dumps(o)) // 2)]),
    st.sampled_from(ODD),
)
finite = st.floats(allow_nan=False, allow_infinity=False)
# Close to what each schema wants, often just over a bound: the cases that get accepted (or nearly).
NEAR = {
    "lookup": st.fixed_dictionaries(
        {
            "code": st.one_of(
                st.from_regex(r"[A-Z0-9]{1,8}", fullmatch=True), st.sampled_from(["abc", "A" * 101])
            )
        },
        optional={
            "count": st.one_of(st.integers(-2, 102), st.sampled_from(["5", " 7 ", "7.0", "x"]), finite),
            "unit": st.sampled_from(["m", "km", "mi", None]),
        },
    ),
    "measure": st.fixed_dictionaries(
        {"value": st.one_of(st.floats(-1, 10), st.integers(-1, 5), st.sampled_from(["3.5", "0", "1e2"]))},
        optional={
            "ratio": st.one_of(st.floats(0, 1.5), st.just("0.5")),
            "flags": st.lists(st.one_of(st.booleans(), st.just("true")), max_size=6),
            "label": st.one_of(st.none(), st.text(max_size=4)),
        },
    ),
    "filter_rows": st.fixed_dictionaries(
        {
            "filter": st.fixed_dictionaries(
                {"field": st.text(max_size=4), "op": st.sampled_from(["eq", "lt", "gt", "ne"])},
                optional={"values": st.lists(st.one_of(st.text(max_size=3), st.integers(), st.none()))},
            )
        },
        optional={"limit": st.one_of(st.integers(-10, 100), st.sampled_from(["20", "25"]))},
    ),
    "place": st.fixed_dictionaries(
        {"at": st.fixed_dictionaries({"x": finite, "y": st.one_of(finite, st.just("1.5"))})},
        optional={
            "target": st.one_of(st.text(max_size=3), st.integers(-2, 5)),
            "kind": st.sampled_from(["pin", "flag"]),
        },
    ),
    "anything": objects,
}
cases = st.one_of(
    st.tuples(st.sampled_from(sorted(NEAR)), raw_arguments),
    st.sampled_from(sorted(NEAR)).flatmap(lambda tool: st.tuples(st.just(tool), NEAR[tool].map(json.dumps))),
)
SPECS = {
    name: ToolSpec(name=name, description=name, parameters=schema, server="recorder", original_name=name)
    for name, schema in SCHEMAS.items()
}


def satisfies(value: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    return [error.message for error in Draft202012Validator(schema).iter_errors(value)]


# --- 1. the checks alone -------------------------------------------------------------------------

checked = {"cases": 0, "accepted": 0}


@FUZZ
@given(case=cases)
def test_the_argument_checks_never_crash_and_accept_only_what_the_schema_allows(
    case: tuple[str, str],
) -> None:
    tool, raw = case
    parsed = parse_arguments(raw, SPECS[tool])
    checked["cases"] += 1
    if parsed.value is None:
        assert parsed.problem, "a refusal always says what is wrong"
        return
    checked["accepted"] += 1
    assert isinstance(parsed.value, dict)
    json.dumps(parsed.value, allow_nan=False).encode("utf-8")
    assert satisfies(parsed.value, SCHEMAS[tool]) == [], (raw, parsed.value)


def test_the_fuzzed_cases_were_tried_and_some_of_each_kind_came_out() -> None:
    """Guards the fuzz itself: it ran its cases, and they were neither all accepted nor all refused."""
    if checked["cases"] == 0:
        pytest.skip("run together with the fuzz test above")
    assert checked["cases"] >= CASES
    assert 0 < checked["accepted"] < checked["cases"]
    print(f"\nfigure: argument checks: {checked['cases']} cases, {checked['accepted']} accepted, 0 crashes")


def test_a_number_too_large_for_a_float_is_refused_not_sent_as_infinity() -> None:
    parsed = parse_arguments('{"at": {"x": 1e400, "y": 0}}', SPECS["place"])
    assert parsed.value is None and "1e400" in (parsed.problem or "")


def test_a_lone_surrogate_is_replaced_so_the_arguments_can_be_sent() -> None:
    parsed = parse_arguments('{"\\udc00": "a\\ud800"}', SPECS["anything"])
    assert parsed.value == {"\ufffd": "a\ufffd"}
    json.dumps(parsed.value, ensure_ascii=False).encode("utf-8")


# --- 2. the whole path, to a real server --------------------------------------------------------


class NextCall:
    """The model: calls the tool with the arguments of the case at hand, then answers."""

    def __init__(self) -> None:
        self.case: tuple[str, str] = ("anything", "{}")
        self.ids = itertools.count(1)

    def __call__(self, request: dict[str, Any]) -> Reply:
        if request["messages"][-1]["role"] == "tool":
            return reply("done")
        tool, raw = self.case
        return tool_reply(FakeCall(name=tool, arguments=raw, id=f"call_{next(self.ids)}"))


@pytest.fixture(scope="module")
def calls_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recorder") / "calls.log"


@pytest.fixture(scope="module")
async def path_to_server(
    calls_log: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Agent, NextCall]]:
    model = NextCall()
    server = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.recorder", str(calls_log)],
        cwd=str(ROOT),
    )
    store = await SQLiteStore.open(tmp_path_factory.mktemp("store") / "nerve.db")
    async with FakeLLMServer(model, strict=False) as llm, MCPHost({"recorder": server}) as host:
        client = OpenAILLM(model="fuzz", base_url=llm.base_url, api_key=None, timeout=30, max_retries=0)
        try:
            yield Agent(llm=client, host=host, store=store, inbox=store, config=AgentConfig()), model
        finally:
            await client.aclose()
            await store.close()


sent = {"cases": 0, "accepted": 0, "turns": 0}
_threads = itertools.count(1)


@FUZZ
@given(case=cases)
async def test_through_the_whole_path_no_invalid_arguments_reach_the_server(
    path_to_server: tuple[Agent, NextCall], case: tuple[str, str]
) -> None:
    tool, raw = case
    agent, model = path_to_server
    model.case = (tool, raw)
    key = ConversationKey(platform="fuzz", workspace="w", channel="c", thread=f"t{next(_threads)}")
    answer = await agent.reply(Incoming(key=key, text="go", user_id="u1"))
    sent["cases"] += 1
    sent["turns"] += answer.text == "done"
    sent["accepted"] += parse_arguments(raw, SPECS[tool]).value is not None


def test_the_server_got_exactly_the_accepted_calls_and_each_was_valid(calls_log: Path) -> None:
    if sent["cases"] == 0:
        pytest.skip("run together with the fuzz test above")
    received = [json.loads(line) for line in calls_log.read_text(encoding="utf-8").splitlines()]
    calls = [entry for entry in received if "tool" in entry]
    assert sent["cases"] >= CASES and sent["turns"] == sent["cases"], "every turn completed"
    assert [c for c in calls if c["problems"]] == [], "an invalid call reached the server"
    assert len(calls) == sent["accepted"] > 0
    print(
        f"\nfigure: whole path: {sent['cases']} turns, {sent['accepted']} calls reached the server, "
        "0 of them invalid, 0 crashes"
    )

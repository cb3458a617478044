"""MCPSecBench's client-side attacks, each with its own hostile server and a model that obeys it.

The servers are real stdio subprocesses (`tests.mcp_servers.mcpsec`) that log every call they run;
the model is the real `openai` client against the local fake model server, whose script obeys the
attack (calls the exfiltration tool, the squatted name, the tool that was just swapped). What counts
is what nerve does as a client: the call never reaches the wrong server, nothing a person did not
approve runs, a collision is named, and the audit names what really ran.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import PLATFORMS
from adapters.terminal.views import reply_as_json
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.mcp.servers_file import load_mcp_config
from bot.model.client import OpenAILLM
from bot.policy.scopes import Place, Rule, Scopes, place_id
from bot.types import ConversationKey, Incoming, ToolSpec
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Step, reply, tool_reply
from tests.mcp_servers.mcpsec import PROMPT_TEXTS, RUG_DESCRIPTIONS

KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="100.1")
PERSON = "U1"
PLACE = Place(platform="slack", channel="C1", user=PERSON)


def mcpsec(role: str, log: Path, **settings: Any) -> ServerConfig:
    return ServerConfig(
        command=sys.executable,
        args=["-m", "tests.mcp_servers.mcpsec", role],
        cwd=str(ROOT),
        env={"MCPSEC_LOG": str(log)},
        **settings,
    )


def ran(log: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(server, tool, arguments) of every call the hostile servers really ran, in order."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [(line["server"], line["tool"], line["arguments"]) for line in lines if line["tool"] != "flip"]


@asynccontextmanager
async def started(servers: dict[str, ServerConfig]) -> AsyncIterator[MCPHost]:
    async with MCPHost(servers, default_timeout=10.0) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        yield host


@asynccontextmanager
async def obeying(script: Callable[[dict[str, Any]], Awaitable[Step]]) -> AsyncIterator[OpenAILLM]:
    """The real openai client against a fake model that answers each request with `script`."""
    async with FakeLLMServer(script, strict=False) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=10.0, max_retries=0)
        try:
            yield llm
        finally:
            await llm.aclose()


def agent_for(llm: OpenAILLM, host: MCPHost, store: Any, **config: Any) -> Agent:
    return Agent(llm=llm, host=host, store=store, inbox=store, approvals=store, config=AgentConfig(**config))


def ask(text: str) -> Incoming:
    return Incoming(key=KEY, text=text, user_id=PERSON, place=PLACE)


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a model request offered, by name."""
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools") or []}


def spec(host: MCPHost, server: str, tool: str) -> ToolSpec | None:
    return next((s for s in host.list_tools() if (s.server, s.original_name) == (server, tool)), None)


async def changed_to(host: MCPHost, server: str, tool: str, check: Callable[[ToolSpec | None], bool]) -> None:
    async with asyncio.timeout(10):
        await host.wait_for(lambda: check(spec(host, server, tool)))


# ---------------------------------------------------------------- A: annotations a server made up


@pytest.mark.parametrize("tool", ["times", "aft_check"])
async def test_a_server_not_trusted_cannot_claim_read_only_to_run_unasked(tmp_path, store, tool):
    """MCPSecBench's data exfiltration (`times` with a private note in `tools_list`) and its
    shadowing `aft_check`: both claim `readOnlyHint`; the model obeys and calls them."""
    log = tmp_path / "calls.log"
    arguments = {"a": 2, "b": 3, "tools_list": "my private note: door code 4711"}
    if tool == "aft_check":
        arguments = {"text": "It is a fine day for a run."}

    async def model(request: dict[str, Any]) -> Step:
        return tool_reply(FakeCall(name=tool, arguments=json.dumps(arguments), id="c1"))

    async with started({"liar": mcpsec("liar", log)}) as host, obeying(model) as llm:
        assert spec(host, "liar", tool).hints.read_only is True  # type: ignore[union-attr]
        answer = await agent_for(llm, host, store).reply(ask("multiply 2 by 3"))

    assert answer.approval is not None, "the call waits for a person"
    assert [(c.server, c.tool) for c in answer.approval.calls] == [("liar", tool)]
    assert ran(log) == [], "nothing reached the lying server"


async def test_a_trusted_servers_read_only_tool_still_runs_at_once_and_the_shipped_servers_are_trusted(
    tmp_path, store
):
    log = tmp_path / "calls.log"

    async def model(request: dict[str, Any]) -> Step:
        if any(m["role"] == "tool" for m in request["messages"]):
            return reply("5")
        return tool_reply(FakeCall(name="add", arguments='{"a": 2, "b": 3}', id="c1"))

    async with started({"calc": mcpsec("calc", log, trustAnnotations=True)}) as host, obeying(model) as llm:
        answer = await agent_for(llm, host, store).reply(ask("add 2 and 3"))

    assert answer.approval is None and answer.text == "5"
    assert ran(log) == [("calc", "add", {"a": 2, "b": 3})]
    assert all(
        server.trust_annotations
        for server in load_mcp_config(ROOT / "mcp.json", platforms=PLATFORMS).servers.values()
    )


# ---------------------------------------------------------------- B: a call screened against one tool


async def test_a_rug_pull_while_the_model_writes_never_runs_the_new_definition_under_the_old_grant(
    tmp_path, store
):
    log = tmp_path / "calls.log"
    requests: list[dict[str, Any]] = []

    async with started({"rug": mcpsec("rug", log)}) as host:
        old = spec(host, "rug", "add")
        assert old is not None
        # A person said "always allow here" for the harmless `add` they were shown.
        await store.remember(place_id(PLACE), "rug", "add", old.definition_hash, "UADMIN")

        async def model(request: dict[str, Any]) -> Step:
            requests.append(request)
            if len(requests) == 1:
                # While the model writes, the server swaps the tool (new description, new parameter).
                await host.call_tool("flip", {})
                await changed_to(
                    host, "rug", "add", lambda s: s is not None and s.definition_hash != old.definition_hash
                )
                return tool_reply(FakeCall(name="add", arguments='{"a": 1, "b": 2}', id="c1"))
            # The model obeys the new description, key and all.
            return tool_reply(
                FakeCall(name="add", arguments='{"a": 1, "b": 2, "api_key": "sk-SECRET"}', id="c2")
            )

        async with obeying(model) as llm:
            answer = await agent_for(llm, host, store).reply(ask("add 1 and 2"))

    assert ran(log) == [], "neither the old grant nor the model ran the swapped tool"
    first_result = next(m for m in requests[1]["messages"] if m["role"] == "tool")
    assert "changed" in first_result["content"]
    assert offered(requests[1])["add"]["description"] == RUG_DESCRIPTIONS[1]
    assert answer.approval is not None, "the new definition waits for a person: the grant was for the old one"
    assert [(c.server, c.tool, c.arguments) for c in answer.approval.calls] == [
        ("rug", "add", {"a": 1, "b": 2, "api_key": "sk-SECRET"})
    ]


async def test_a_name_stolen_by_a_denied_server_while_the_model_writes_runs_on_the_screened_server(
    tmp_path, store
):
    log = tmp_path / "calls.log"
    # The thief comes first in the file: order used to decide who kept the plain name.
    servers = {"thief": mcpsec("thief", log), "calc": mcpsec("calc", log, trustAnnotations=True)}
    scopes = Scopes(rules={"slack:C1": Rule(deny=("thief",))})
    requests: list[dict[str, Any]] = []

    async with started(servers) as host:

        async def model(request: dict[str, Any]) -> Step:
            requests.append(request)
            if len(requests) == 1:
                await host.call_tool("flip", {})
                await changed_to(host, "thief", "add.", lambda s: s is not None)
                return tool_reply(FakeCall(name="add", arguments='{"a": 20, "b": 22}', id="c1"))
            return reply("42")

        async with obeying(model) as llm:
            agent = agent_for(llm, host, store, scopes=scopes)
            answer = await agent.reply(ask("add 20 and 22"))
            names = {s.name: s.server for s in host.list_tools()}
        audit = await store.audit_log(KEY)

    assert "thief" not in {tool.get("name") for tool in offered(requests[0]).values()}
    assert ran(log) == [("calc", "add", {"a": 20, "b": 22})], "the call ran where it was screened"
    assert [(e.server, e.tool) for e in audit] == [("calc", "add")], "the audit names what ran"
    assert [a.server for a in answer.attachments] == ["calc"]
    assert reply_as_json(answer, audit)["tool_calls"][0]["server"] == "calc"
    assert "add" not in names, "after the theft both parties carry their server's name"
    assert names["calc__add"] == "calc" and names["thief__add"] == "thief"


async def test_a_tool_that_vanished_after_the_call_was_checked_is_refused_clearly(tmp_path, store):
    log = tmp_path / "calls.log"
    async with started({"calc": mcpsec("calc", log, trustAnnotations=True)}) as host:
        screened = spec(host, "calc", "add")
        assert screened is not None
        moved = ToolSpec(**{**_fields(screened), "server": "elsewhere"})
        result = await host.call_tool("add", {"a": 1, "b": 1}, screened=moved)
    assert result.error_kind == "changed" and "no longer offers it" in (result.detail or "")
    assert ran(log) == []


def _fields(spec: ToolSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}


# ---------------------------------------------------------------- C: names decided by file order


@pytest.mark.parametrize("calc_first", [True, False])
async def test_look_alike_tools_prefix_every_party_whatever_the_file_order(tmp_path, calc_first, caplog):
    log = tmp_path / "calls.log"
    pair = [("calc", mcpsec("calc", log)), ("squat", mcpsec("squat", log))]
    servers = dict(pair if calc_first else reversed(pair))
    with caplog.at_level(logging.WARNING, logger="bot.mcp.host"):
        async with started(servers) as host:
            names = {s.name: (s.server, s.original_name) for s in host.list_tools()}
            obeyed = await host.call_tool("send_email", {"to": "boss@corp.example", "body": "hi"})

    assert names == {
        "add": ("calc", "add"),
        "calc__compute": ("calc", "compute"),
        "squat__Compute": ("squat", "Compute"),
        "calc__send_email": ("calc", "send_email"),
        "squat__send_email": ("squat", "send_email_"),
    }
    assert obeyed.error_kind == "unknown_tool", "the squatted name reaches no server"
    assert ran(log) == []
    collisions = [r.getMessage() for r in caplog.records if "collide" in r.getMessage()]
    assert any(
        "'send_email_' of server 'squat'" in line and "'send_email' of server 'calc'" in line
        for line in collisions
    )


@pytest.mark.parametrize("order", [("calc", "twin", "squat"), ("squat", "twin", "calc")])
async def test_a_prompt_named_like_another_servers_renamed_prompt_never_replaces_it(tmp_path, order):
    log = tmp_path / "calls.log"
    servers = {role: mcpsec(role, log) for role in order}
    async with started(servers) as host:
        texts = {p.name: (p.server, await host.get_prompt(p.name, {})) for p in host.list_prompts()}

    assert len(texts) == 3, "three prompts, three names"
    for name, (server, text) in texts.items():
        assert text == PROMPT_TEXTS[server], f"{name} gives its own server's text"
        assert name.startswith(f"{server}_"), "every party to the collision carries its server's name"
    assert "calc_compute_summary" not in texts or texts["calc_compute_summary"][0] == "calc"

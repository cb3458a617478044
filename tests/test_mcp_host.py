"""The MCP host against real MCP servers running as stdio (and HTTP) subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

from adapters.settings import PLATFORMS
from bot.mcp.catalog import ListedTool, build_catalog, clean_schema, sanitize_name
from bot.mcp.host import MCPHost
from bot.mcp.results import classify_error, from_call_result
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.mcp.servers_file import load_mcp_config
from bot.seams import ToolHost
from tests.mcp_servers.warm_start import COLD_VARIABLE
from tests.ports import unused_port

ROOT = Path(__file__).resolve().parents[1]
OPENAI_NAME = r"^[a-zA-Z0-9_-]{1,64}$"


def stdio(module: str, **kwargs: Any) -> ServerConfig:
    env = kwargs.pop("env", {})
    return ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", module], cwd=str(ROOT), env=env, **kwargs
    )


def kit_server(name: str, **kwargs: Any) -> ServerConfig:
    return stdio("tests.mcp_servers.testkit", env={"TESTKIT_NAME": name}, **kwargs)


def child_pids() -> set[int]:
    """Live (not zombie) children of this test process."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and state != "Z":
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# One host for the tests that leave its servers as they found them: starting an MCP server costs
# about a second and a half of CPU (importing the SDK), so each test starting its own adds up.
SHARED = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared():
    servers = load_mcp_config(ROOT / "mcp.json", platforms=PLATFORMS).servers
    servers["alpha"] = kit_server(
        "alpha",
        timeout=7,
        tools={
            "echo": ToolOverride(description="Say it back.", timeout=2, triggers=["repeat", "echo"]),
            "crash": ToolOverride(enabled=False),
            "hang": ToolOverride(timeout=0.5),
        },
    )
    servers["beta"] = kit_server("beta")
    async with MCPHost(servers, default_timeout=30) as host:
        async with asyncio.timeout(60):  # start() may return before a slow machine started all four
            await host.wait_for(lambda: not host.starting())
        yield host


# --- the seed servers, from the real servers file -------------------------------------------------


@SHARED
async def test_both_seed_servers_start_together_and_offer_openai_ready_specs(shared):
    assert shared.problems() == []
    specs = {spec.name: spec for spec in shared.list_tools()}
    assert {"get_environment_status", "simulate_geolocation"} <= set(specs)

    env = specs["get_environment_status"]
    assert env.server == "env-query" and env.original_name == "get_environment_status"
    assert env.description.startswith("Current environmental conditions")  # mcp.json wins (S3)
    assert env.timeout == 15
    assert "air quality" in env.triggers and "weather" in env.triggers
    assert env.to_openai() == {
        "type": "function",
        "function": {
            "name": "get_environment_status",
            "description": env.description,
            "parameters": {
                "type": "object",
                "properties": {
                    "area_code": {
                        "type": "string",
                        "description": "Area code: one capital letter and four digits, e.g. 'A1001'.",
                        "pattern": "^[A-Z][0-9]{4}$",
                        "minLength": 5,
                        "maxLength": 5,
                    }
                },
                "required": ["area_code"],
            },
        },
    }
    geo = specs["simulate_geolocation"].parameters
    assert geo["required"] == ["lat", "lng"]
    assert geo["properties"]["lat"] == {
        "type": "number",
        "minimum": -90,
        "maximum": 90,
        "description": "Latitude in degrees.",
    }
    assert geo["properties"]["radius"]["default"] == 100
    assert (geo["properties"]["radius"]["minimum"], geo["properties"]["radius"]["maximum"]) == (10, 5000)

    result = await shared.call_tool("simulate_geolocation", {"lat": 31.23, "lng": 121.47, "radius": 500})
    assert not result.is_error and result.error_kind is None
    assert json.loads(result.content) == result.structured
    parks = [p for p in result.structured["nearby"] if p["type"] == "park"]
    assert parks and parks[0]["distance_m"] <= 500
    assert result.latency_ms > 0


@SHARED
async def test_a_seed_server_rejects_a_bad_area_code_as_an_argument_error(shared):
    result = await shared.call_tool("get_environment_status", {"area_code": "somewhere"})
    assert result.is_error and result.error_kind == "arguments"
    assert "A1001" in result.content


# --- configuration: overrides and names -----------------------------------------------------------


@SHARED
async def test_overrides_set_description_timeout_and_triggers_and_hide_disabled_tools(shared):
    specs = {spec.name: spec for spec in shared.list_tools()}
    assert "alpha__crash" not in specs and "crash" in specs  # beta's, no longer colliding
    assert specs["alpha__echo"].description == "Say it back."
    assert specs["alpha__echo"].timeout == 2 and specs["alpha__echo"].triggers == ("repeat", "echo")
    assert specs["alpha__whoami"].timeout == 7  # the server's timeout when the tool has none
    assert specs["beta__whoami"].timeout == 30  # the host's default when neither has one
    assert specs["beta__echo"].description == "Return the text unchanged."
    hidden = await shared.call_tool("alpha__crash", {})
    assert hidden.error_kind == "unknown_tool"


@SHARED
async def test_names_two_servers_share_are_prefixed_and_each_call_reaches_its_own_server(shared):
    names = [spec.name for spec in shared.list_tools()]
    assert "alpha__whoami" in names and "beta__whoami" in names and "whoami" not in names
    assert all(re.match(OPENAI_NAME, name) for name in names)
    alpha, beta = await asyncio.gather(
        shared.call_tool("alpha__whoami", {}), shared.call_tool("beta__whoami", {})
    )
    assert (alpha.structured, beta.structured) == ({"result": "alpha"}, {"result": "beta"})


@SHARED
async def test_an_unknown_tool_name_is_an_error_that_lists_the_real_names(shared):
    result = await shared.call_tool("get_enviroment_status", {"area_code": "A1001"})
    assert result.is_error and result.error_kind == "unknown_tool"
    assert "get_enviroment_status" in result.content
    assert "get_environment_status" in result.content and "alpha__echo" in result.content


# --- failures -------------------------------------------------------------------------------------


async def test_servers_that_fail_to_start_are_reported_and_do_not_block_the_others(caplog):
    servers = {
        "env-query": stdio("servers.env_query"),
        "broken": ServerConfig(
            trustAnnotations=True,
            command=sys.executable,
            args=["-c", "import sys; sys.stderr.write('missing API key\\n'); sys.exit(3)"],
        ),
        "missing": ServerConfig(command="/nonexistent/mcp-server"),
    }
    async with MCPHost(servers) as host:
        problems = dict(host.problems())
        assert set(problems) == {"broken", "missing"}
        # The server's stderr is in the log under its name; the report only points there.
        assert "missing API key" not in problems["broken"] and "see the log" in problems["broken"]
        assert any(
            r.name == "bot.mcp.stderr.broken" and "missing API key" in r.getMessage() for r in caplog.records
        )
        assert "could not be started" in problems["missing"]
        assert [spec.name for spec in host.list_tools()] == ["get_environment_status"]
        result = await host.call_tool("get_environment_status", {"area_code": "A1001"})
        assert not result.is_error


async def test_a_server_that_never_answers_the_handshake_is_given_up_on_in_time():
    # Reads its stdin (so it exits when we close it) but never says a word.
    silent = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-c", "import sys; sys.stdin.read()"]
    )
    async with asyncio.timeout(10), MCPHost({"silent": silent}, connect_timeout=0.5) as host:
        assert host.problems() == [("silent", "did not finish starting within 0.5 s")]
        assert host.list_tools() == []
        result = await host.call_tool("anything", {})
        assert result.error_kind == "unknown_tool"


async def test_a_server_that_crashes_mid_call_is_unavailable_then_restarted_with_its_tools():
    async with MCPHost({"kit": kit_server("kit")}) as host:
        before = {spec.name for spec in host.list_tools()}
        crashed = await host.call_tool("crash", {})
        assert crashed.is_error and crashed.error_kind == "unavailable"
        assert "kit" in crashed.content
        assert [name for name, _ in host.problems()] == ["kit"]
        assert {spec.name for spec in host.list_tools()} == before  # names stay stable meanwhile
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        again = await host.call_tool("echo", {"text": "back"})
        assert again.structured == {"result": "back"}
        assert {spec.name for spec in host.list_tools()} == before


@SHARED
async def test_a_hanging_call_times_out_is_cancelled_on_the_server_and_the_session_goes_on(shared):
    result = await shared.call_tool("alpha__hang", {})
    assert result.is_error and result.error_kind == "timeout"
    assert "0.5 s" in result.content
    cancelled = await shared.call_tool("alpha__hang_was_cancelled", {})
    assert cancelled.structured == {"result": True}  # notifications/cancelled reached the server
    assert (await shared.call_tool("alpha__echo", {"text": "still here"})).structured == {
        "result": "still here"
    }


@SHARED
async def test_tool_failures_are_classified_for_the_loop(shared):
    failed = await shared.call_tool("beta__fail", {})
    assert (failed.error_kind, failed.content) == (
        "execution",
        "Error executing tool fail: the database is down",
    )
    bad = await shared.call_tool("beta__add", {"a": "one", "b": 2})
    assert bad.error_kind == "arguments"
    limited = await shared.call_tool("beta__rate_limited", {})
    assert (limited.error_kind, limited.retry_after) == ("rate_limited", 7.0)


# --- data and concurrency -------------------------------------------------------------------------


@SHARED
async def test_a_two_megabyte_result_arrives_intact(shared):
    result = await shared.call_tool("beta__huge", {"size": 2_000_000})
    assert not result.is_error and result.structured is None
    assert len(result.content) == 2_000_000
    assert result.content == ("0123456789abcdef" * 125_000)


@SHARED
async def test_two_calls_to_one_server_run_at_the_same_time(shared):
    async with asyncio.timeout(10):
        blocked = asyncio.create_task(shared.call_tool("beta__block", {"key": "k"}))
        # Only answers while `block` is waiting on the server: serialised calls would deadlock.
        seen = await shared.call_tool("beta__wait_for_blocked", {"key": "k"})
        assert seen.structured == {"result": True}
        await shared.call_tool("beta__release", {"key": "k"})
        assert (await blocked).structured == {"result": "released k"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_tool_list_change_reaches_the_catalog(mode):
    async with MCPHost({"kit": kit_server("kit")}, mode=mode) as host:
        await host.call_tool("add_tool", {"name": "fresh"})
        async with asyncio.timeout(10):
            await host.wait_for(lambda: any(spec.name == "fresh" for spec in host.list_tools()))
        assert (await host.call_tool("fresh", {})).content == "I am fresh"


async def test_paginated_tool_lists_are_followed_to_the_end():
    async with MCPHost({"paged": stdio("tests.mcp_servers.paged")}) as host:
        assert [spec.name for spec in host.list_tools()] == [
            "page_one_a",
            "page_one_b",
            "page_two",
            "page_three",
        ]
        assert (await host.call_tool("page_three", {})).content == "called page_three"


# --- lifecycle ------------------------------------------------------------------------------------


async def test_closing_leaves_no_child_processes():
    before = child_pids()
    host = MCPHost({"env-query": stdio("servers.env_query")})
    await host.start()
    ours = child_pids() - before
    assert len(ours) == 1
    await host.aclose()
    assert not [pid for pid in ours if alive(pid)]


async def test_cancelling_the_owner_of_the_host_still_stops_its_children():
    before = child_pids()
    ready = asyncio.Event()

    async def owner() -> None:
        # Started cold: the process the host started is the server itself, so its end is checked.
        cold = kit_server("kit").model_copy(update={"env": {"TESTKIT_NAME": "kit", COLD_VARIABLE: "1"}})
        async with MCPHost({"kit": cold}):
            ready.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(owner())
    async with asyncio.timeout(20):
        await ready.wait()
        ours = child_pids() - before
        assert len(ours) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not [pid for pid in ours if alive(pid)]


async def test_a_streamable_http_server_is_reached_by_url():
    port = unused_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mcp_servers.testkit",
        "streamable-http",
        str(port),
        cwd=ROOT,
        env={**os.environ, "TESTKIT_NAME": "remote"},
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        # The first attempts may find nothing listening yet; the host retries in the background.
        async with MCPHost(
            {
                "remote": ServerConfig(
                    trustAnnotations=True, url=f"http://127.0.0.1:{port}/mcp", allow_private_network=True
                )
            }
        ) as host:
            async with asyncio.timeout(20):
                await host.wait_until_ready()
            assert (await host.call_tool("whoami", {})).structured == {"result": "remote"}
    finally:
        server.terminate()
        await server.wait()


# --- pure parts: catalog and results --------------------------------------------------------------


def test_long_or_odd_names_are_sanitised_to_what_providers_accept():
    assert sanitize_name("files.read") == "files_read"
    long = sanitize_name("x" * 80)
    assert len(long) == 64 and long != sanitize_name("x" * 81)
    assert re.match(OPENAI_NAME, sanitize_name("weird name/with:chars"))


def test_schema_cleaning_drops_generated_titles_but_keeps_a_property_named_title():
    schema = {
        "title": "noteArguments",
        "type": "object",
        "properties": {"title": {"title": "Title", "type": "string"}, "tags": {"items": {"title": "T"}}},
        "required": ["title"],
    }
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "tags": {"items": {}}},
        "required": ["title"],
    }
    assert clean_schema({}) == {"type": "object", "properties": {}}


def test_a_collision_prefixes_both_tools_but_a_disabled_tool_does_not_collide():
    tool = ListedTool(name="search", description="d", input_schema={"type": "object"})
    servers = {"web": ServerConfig(command="x"), "docs": ServerConfig(command="x")}
    assert set(build_catalog({"web": [tool], "docs": [tool]}, servers, default_timeout=30)[0]) == {
        "web__search",
        "docs__search",
    }
    servers["docs"] = ServerConfig(command="x", tools={"search": ToolOverride(enabled=False)})
    assert set(build_catalog({"web": [tool], "docs": [tool]}, servers, default_timeout=30)[0]) == {"search"}


def test_structured_content_becomes_exact_json_and_other_blocks_are_described():
    structured = CallToolResult(content=[], structured_content={"city": "上海", "quote": 'say "hi"'})
    result = from_call_result(structured, latency_ms=1.0)
    assert result.content == '{"city": "上海", "quote": "say \\"hi\\""}'
    assert result.structured == {"city": "上海", "quote": 'say "hi"'}
    mixed = CallToolResult(
        content=[
            TextContent(type="text", text="a chart:"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="file:///notes.txt", text="the notes")
            ),
        ]
    )
    assert from_call_result(mixed, latency_ms=1.0).content == (
        "a chart:\n[image (image/png, about 3 bytes) omitted]\nthe notes"
    )


def test_error_texts_are_classified():
    assert classify_error("1 validation error for addArguments\na\n  Input should be a valid integer") == (
        "arguments",
        None,
    )
    assert classify_error("Input validation error: 'lat' is a required property") == ("arguments", None)
    assert classify_error("429 Too Many Requests, retry-after: 1500 ms") == ("rate_limited", 1.5)
    assert classify_error("rate limited") == ("rate_limited", None)
    assert classify_error("Error executing tool x: disk full") == ("execution", None)


def test_the_host_fits_the_tool_host_seam_and_can_be_built_before_the_loop_runs():
    seam: ToolHost = MCPHost({"env-query": stdio("servers.env_query")})
    assert seam.list_tools() == []  # nothing is offered until start() has listed the tools

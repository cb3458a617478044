"""The seed MCP servers, run as real stdio subprocesses, and their simulations."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from servers.env_query import AREA_CODE_PATTERN, environment_status
from servers.geo_simulator import area_code_for, simulate
from servers.stdio import delay_from_env as env_delay

ROOT = Path(__file__).resolve().parents[1]
SHARED = pytest.mark.asyncio(loop_scope="module")


def params(module: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", module], cwd=str(ROOT), env=env)


async def held_client(server: StdioServerParameters) -> AsyncIterator[Client]:
    """A client opened and closed in one task of its own: fixture setup and teardown run in different
    tasks, and the client's cancel scopes must be left in the task that entered them."""
    opened: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        async with Client(server) as client:
            opened.set_result(client)
            await done.wait()

    holder = asyncio.create_task(hold())
    async with asyncio.timeout(30):
        either: list[asyncio.Future[Any]] = [opened, holder]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    yield opened.result()
    done.set()
    async with asyncio.timeout(30):
        await holder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env_client():
    async for client in held_client(params("servers.env_query")):
        yield client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def geo_client():
    async for client in held_client(params("servers.geo_simulator")):
        yield client


# --- env-query --------------------------------------------------------------------------------------


@SHARED
async def test_env_query_lists_one_tool_whose_schema_carries_the_area_code_rule(env_client):
    (tool,) = (await env_client.list_tools()).tools
    assert tool.name == "get_environment_status"
    assert "air quality" in tool.description
    area = tool.input_schema["properties"]["area_code"]
    assert (area["type"], area["pattern"], area["minLength"], area["maxLength"]) == (
        "string",
        AREA_CODE_PATTERN,
        5,
        5,
    )
    assert tool.input_schema["required"] == ["area_code"]
    assert set(tool.output_schema["properties"]) >= {"air_quality", "temperature_c", "outdoor_activity"}


@SHARED
async def test_env_query_answers_the_same_for_the_same_area_and_differently_for_another(env_client):
    first = await env_client.call_tool("get_environment_status", {"area_code": "A1001"})
    again = await env_client.call_tool("get_environment_status", {"area_code": "A1001"})
    other = await env_client.call_tool("get_environment_status", {"area_code": "B2002"})
    assert not first.is_error
    assert first.structured_content == again.structured_content == environment_status("A1001").model_dump()
    assert other.structured_content != first.structured_content
    air = first.structured_content["air_quality"]
    assert 0 <= air["aqi"] <= 500 and air["category"] and air["pm25_ugm3"] > 0
    assert json.loads(first.content[0].text) == first.structured_content


@SHARED
@pytest.mark.parametrize("code", ["a1001", "A10", "AB1234", "Shanghai", ""])
async def test_env_query_rejects_a_malformed_area_code_and_says_how_to_fix_it(env_client, code):
    result = await env_client.call_tool("get_environment_status", {"area_code": code})
    assert result.is_error
    assert "Invalid arguments" in result.content[0].text and "A1001" in result.content[0].text


@SHARED
async def test_env_query_rejects_a_missing_or_mistyped_area_code(env_client):
    for arguments in ({}, {"area_code": 1001}):
        result = await env_client.call_tool("get_environment_status", arguments)
        assert result.is_error and "validation error" in result.content[0].text


def test_every_air_quality_category_and_piece_of_advice_occurs_somewhere():
    statuses = [environment_status(f"{letter}{n}") for letter in "ABCDEFGH" for n in range(1000, 1250)]
    categories = Counter(status.air_quality.category for status in statuses)
    assert set(categories) >= {
        "Good",
        "Moderate",
        "Unhealthy for Sensitive Groups",
        "Unhealthy",
        "Very Unhealthy",
    }
    assert categories["Good"] + categories["Moderate"] > len(statuses) / 2  # mostly breathable
    assert len({status.outdoor_activity for status in statuses}) == 7


# --- geo-simulator ----------------------------------------------------------------------------------


@SHARED
async def test_geo_simulator_lists_one_tool_with_bounded_coordinates_and_radius(geo_client):
    (tool,) = (await geo_client.list_tools()).tools
    assert tool.name == "simulate_geolocation"
    props = tool.input_schema["properties"]
    assert (props["lat"]["minimum"], props["lat"]["maximum"]) == (-90, 90)
    assert (props["lng"]["minimum"], props["lng"]["maximum"]) == (-180, 180)
    assert (props["radius"]["minimum"], props["radius"]["maximum"], props["radius"]["default"]) == (
        10,
        5000,
        100,
    )
    assert tool.input_schema["required"] == ["lat", "lng"]


@SHARED
async def test_geo_simulator_describes_a_place_the_same_way_every_time(geo_client):
    arguments = {"lat": 31.23, "lng": 121.47, "radius": 1000}
    first = await geo_client.call_tool("simulate_geolocation", arguments)
    again = await geo_client.call_tool("simulate_geolocation", arguments)
    assert not first.is_error
    assert first.structured_content == again.structured_content == simulate(31.23, 121.47, 1000).model_dump()
    nearby = first.structured_content["nearby"]
    assert [p["distance_m"] for p in nearby] == sorted(p["distance_m"] for p in nearby)
    assert all(p["within_radius"] and p["distance_m"] <= 1000 for p in nearby)


@SHARED
@pytest.mark.parametrize(
    "arguments",
    [
        {"lat": 999, "lng": 0},
        {"lat": 0, "lng": -181},
        {"lat": 0, "lng": 0, "radius": 5},
        {"lat": "north", "lng": 0},
    ],
)
async def test_geo_simulator_rejects_coordinates_and_radii_out_of_range(geo_client, arguments):
    result = await geo_client.call_tool("simulate_geolocation", arguments)
    assert result.is_error and "validation error" in result.content[0].text


@pytest.mark.parametrize("radius", [10, 100, 300, 500, 1000, 2000, 5000])
def test_the_shanghai_example_always_has_a_park_within_500_m(radius):
    location = simulate(31.23, 121.47, radius)
    assert any(p.type == "park" and p.distance_m <= 500 for p in location.nearby)
    assert len(location.nearby) >= 3


def test_the_area_code_of_a_location_is_one_env_query_accepts():
    for lat, lng in [(31.23, 121.47), (-33.87, 151.21), (90, 180), (-90, -180), (0, 0)]:
        assert re.fullmatch(AREA_CODE_PATTERN, area_code_for(lat, lng))
        assert simulate(lat, lng, 100).area_code == area_code_for(lat, lng)


# --- both -------------------------------------------------------------------------------------------


def test_a_server_s_own_delay_variable_wins_over_the_shared_one():
    assert env_delay({"NERVE_SEED_DELAY_MS": "300"}, "ENV_QUERY_DELAY_MS") == 0.3
    assert env_delay({"NERVE_SEED_DELAY_MS": "300", "ENV_QUERY_DELAY_MS": "50"}, "ENV_QUERY_DELAY_MS") == 0.05
    assert env_delay({"NERVE_SEED_DELAY_MS": "soon"}, "ENV_QUERY_DELAY_MS") == 0.0
    assert env_delay({}, "ENV_QUERY_DELAY_MS") == 0.0


async def test_the_delay_variable_slows_every_answer():
    async with Client(params("servers.geo_simulator", NERVE_SEED_DELAY_MS="300")) as client:
        started = time.perf_counter()
        result = await client.call_tool("simulate_geolocation", {"lat": 1, "lng": 2})
        assert not result.is_error
        assert time.perf_counter() - started >= 0.3


async def test_nothing_but_json_rpc_reaches_stdout():
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "servers.env_query",
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={"NERVE_SEED_LOG_LEVEL": "DEBUG", "PATH": "/usr/bin:/bin"},
    )
    assert process.stdin and process.stdout
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_environment_status", "arguments": {"area_code": "nope"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "get_environment_status", "arguments": {"area_code": "A1001"}},
        },
    ]
    process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    await process.stdin.drain()
    seen: dict[int, dict[str, Any]] = {}
    async with asyncio.timeout(20):
        while len(seen) < 3:
            line = await process.stdout.readline()
            assert line, "the server closed stdout early"
            message = json.loads(line)  # every line must be JSON-RPC, even with DEBUG logging on
            assert message["jsonrpc"] == "2.0"
            if "id" in message:
                seen[message["id"]] = message
        process.stdin.close()
        await process.wait()
    assert (
        seen[2]["result"]["isError"] is True
        and seen[3]["result"]["structuredContent"]["area_code"] == "A1001"
    )

"""Trust data in the catalog: annotations, approval modes and definition hashes from real servers."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from adapters.settings import PLATFORMS
from bot.mcp.catalog import ListedTool, build_catalog
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.mcp.servers_file import load_mcp_config
from bot.policy.approval import ToolHints, definition_hash
from bot.types import ToolSpec
from tests.mcp_servers.trust import APPEND_DESCRIPTIONS

ROOT = Path(__file__).resolve().parents[1]
SHARED = pytest.mark.asyncio(loop_scope="module")


def trust_server(notes: Path, log: Path, **kwargs: Any) -> ServerConfig:
    env = {"TRUST_NOTES": str(notes), "TRUST_LOG": str(log)}
    return ServerConfig(
        command=sys.executable, args=["-m", "tests.mcp_servers.trust"], cwd=str(ROOT), env=env, **kwargs
    )


def spec_of(host: MCPHost, server: str, tool: str) -> ToolSpec:
    [spec] = [s for s in host.list_tools() if s.server == server and s.original_name == tool]
    return spec


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def trust(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MCPHost]:
    """The trust server twice: once with the default mode, once set to `never` with overrides."""
    folder = tmp_path_factory.mktemp("trust")
    servers = {
        "notes": trust_server(
            folder / "notes.txt",
            folder / "calls.log",
            tools={"peek": ToolOverride(approval="always")},
            trustAnnotations=True,
        ),
        # The same server, its annotations not trusted: under `writes` every call asks.
        "stranger": trust_server(folder / "stranger.txt", folder / "stranger.log"),
        "relaxed": trust_server(
            folder / "relaxed.txt",
            folder / "relaxed.log",
            approval="never",
            tools={"delete_note": ToolOverride(approval="always")},
        ),
    }
    async with MCPHost(servers, default_timeout=10.0) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        yield host


@SHARED
async def test_the_servers_annotations_reach_each_tool_spec_as_hints(trust):
    assert spec_of(trust, "notes", "read_note").hints == ToolHints(read_only=True, open_world=False)
    assert spec_of(trust, "notes", "append_note").hints == ToolHints()
    assert spec_of(trust, "notes", "delete_note").hints == ToolHints(read_only=False, destructive=True)


@SHARED
async def test_under_writes_only_the_read_only_tool_runs_at_once(trust):
    needs = {s.original_name: s.needs_approval for s in trust.list_tools() if s.server == "notes"}
    assert needs == {
        "read_note": False,
        "append_note": True,
        "delete_note": True,
        "peek": True,
        "change_definitions": True,
    }
    stranger = {s.original_name: s.needs_approval for s in trust.list_tools() if s.server == "stranger"}
    assert stranger == dict.fromkeys(needs, True), "a read-only claim lowers nothing for a server not trusted"


@SHARED
async def test_the_approval_mode_is_the_tools_setting_else_the_servers_else_writes(trust):
    assert spec_of(trust, "notes", "append_note").approval == "writes"
    assert spec_of(trust, "notes", "peek").approval == "always"
    assert spec_of(trust, "relaxed", "append_note").approval == "never"
    assert spec_of(trust, "relaxed", "delete_note").approval == "always"
    assert not spec_of(trust, "relaxed", "append_note").needs_approval
    assert spec_of(trust, "relaxed", "delete_note").needs_approval


@SHARED
async def test_the_lying_tool_configured_always_needs_approval_though_it_claims_read_only(trust):
    peek = spec_of(trust, "notes", "peek")
    assert peek.hints.read_only is True
    assert peek.needs_approval


@SHARED
async def test_each_tool_carries_the_hash_of_its_definition_as_the_server_gave_it(trust, tmp_path):
    command = StdioServerParameters(command=sys.executable, args=["-m", "tests.mcp_servers.trust"], cwd=ROOT)
    async with Client(command) as client:
        listing = {tool.name: tool for tool in (await client.list_tools()).tools}
    read_note = listing["read_note"]
    expected = definition_hash(
        "read_note",
        read_note.description or "",
        read_note.input_schema,  # as sent, generated titles and all
        {"readOnlyHint": True, "openWorldHint": False},
    )

    assert spec_of(trust, "notes", "read_note").definition_hash == expected
    # Two copies of one server define their tools identically, whatever we configure around them.
    assert spec_of(trust, "relaxed", "read_note").definition_hash == expected
    assert spec_of(trust, "notes", "peek").definition_hash != expected


async def test_the_trust_server_writes_its_note_and_logs_every_call(tmp_path):
    notes, log = tmp_path / "notes.txt", tmp_path / "calls.log"
    async with MCPHost({"notes": trust_server(notes, log)}, default_timeout=10.0) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        appended = await host.call_tool("append_note", {"text": "hello"})
        peeked = await host.call_tool("peek", {})
        deleted = await host.call_tool("delete_note", {})

    assert not (appended.is_error or peeked.is_error or deleted.is_error)
    assert peeked.content == "hello\npeeked\n"  # the lie: "read-only", and it wrote
    assert not notes.exists()
    tools = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert tools == ["append_note", "peek", "delete_note"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_changed_definition_reaches_the_catalog_with_a_new_hash(tmp_path, mode):
    server = trust_server(tmp_path / "notes.txt", tmp_path / "calls.log")
    async with MCPHost({"notes": server}, mode=mode, default_timeout=10.0) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        before = {s.original_name: s.definition_hash for s in host.list_tools()}

        await host.call_tool("change_definitions", {})
        async with asyncio.timeout(10):
            await host.wait_for(
                lambda: spec_of(host, "notes", "append_note").definition_hash != before["append_note"]
            )

        after = {s.original_name: s.definition_hash for s in host.list_tools()}
        assert spec_of(host, "notes", "append_note").description == APPEND_DESCRIPTIONS[1]
        assert {name for name in before if before[name] != after[name]} == {"append_note"}

        await host.call_tool("change_definitions", {})
        async with asyncio.timeout(10):
            await host.wait_for(
                lambda: spec_of(host, "notes", "append_note").definition_hash == before["append_note"]
            )


def test_the_definition_hash_ignores_our_own_description_override_and_the_mode_ignores_annotations():
    listed = ListedTool(
        name="delete_file",
        description="Delete a file.",
        input_schema={"type": "object", "properties": {"path": {"type": "string", "title": "Path"}}},
        annotations={"readOnlyHint": True},
    )
    servers = {
        "fs": ServerConfig(
            command="x",
            approval="never",
            tools={"delete_file": ToolOverride(description="Use only when asked.", approval="always")},
        ),
        "plain": ServerConfig(command="x", trustAnnotations=True),
        "stranger": ServerConfig(command="x"),
    }
    catalog, _ = build_catalog(
        {"fs": [listed], "plain": [listed], "stranger": [listed]}, servers, default_timeout=5
    )

    for spec in catalog.values():
        assert spec.definition_hash == definition_hash(
            "delete_file", "Delete a file.", listed.input_schema, {"readOnlyHint": True}
        )
    assert catalog["fs__delete_file"].description == "Use only when asked."
    assert catalog["fs__delete_file"].approval == "always" and catalog["fs__delete_file"].needs_approval
    assert catalog["plain__delete_file"].approval == "writes"
    assert not catalog["plain__delete_file"].needs_approval  # a trusted server's read-only claim
    assert catalog["stranger__delete_file"].approval == "writes"
    assert catalog["stranger__delete_file"].needs_approval  # the same claim from a server not trusted


def test_our_seed_servers_are_configured_with_the_default_mode():
    servers = load_mcp_config(ROOT / "mcp.json", platforms=PLATFORMS).servers
    assert {name: s.approval for name, s in servers.items()} == {name: "writes" for name in servers}


@SHARED
async def test_the_seed_servers_declare_their_tools_read_only_so_the_seed_question_runs_at_once():
    async with MCPHost(
        load_mcp_config(ROOT / "mcp.json", platforms=PLATFORMS).servers, default_timeout=10.0
    ) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        specs = {s.name: s for s in host.list_tools()}

    assert {"get_environment_status", "simulate_geolocation"} <= set(specs)
    for spec in specs.values():
        assert spec.hints == ToolHints(read_only=True, open_world=False), spec.name
        assert not spec.needs_approval, spec.name


async def test_the_test_servers_mark_exactly_their_answering_tools_read_only():
    """Tests that drive these servers through the agent mean calls that run at once; only tools
    that change something wait for a person under the default mode."""

    def module(name: str, *args: str) -> ServerConfig:
        return ServerConfig(
            command=sys.executable, args=["-m", name, *args], cwd=str(ROOT), trustAnnotations=True
        )

    servers = {
        "kit": module("tests.mcp_servers.testkit"),
        "loop": module("tests.mcp_servers.loop"),
        "hostile": module("tests.mcp_servers.hostile"),
        "files": module("tests.mcp_servers.files", str(ROOT / "nonexistent-root")),
        "paged": module("tests.mcp_servers.paged"),
    }
    async with MCPHost(servers, default_timeout=10.0) as host:
        async with asyncio.timeout(60):
            await host.wait_until_ready()
        waiting = {(s.server, s.original_name) for s in host.list_tools() if s.needs_approval}
        assert {s.server for s in host.list_tools()} == set(servers)

    assert waiting == {
        ("kit", "release"),
        ("kit", "crash"),
        ("kit", "add_tool"),
        ("files", "write_file"),
        ("files", "edit_file"),
        ("files", "create_directory"),
        ("files", "move_file"),
    }

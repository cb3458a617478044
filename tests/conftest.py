"""Shared fixtures: real MCP servers as stdio subprocesses, a real SQLite store on a temp file."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import ServerConfig, ToolOverride
from bot.mcp.host import MCPHost
from bot.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent


def stdio_server(module: str, **tools: ToolOverride) -> ServerConfig:
    """A server started as `python -m module` from the repository root."""
    return ServerConfig(command=sys.executable, args=["-m", module], cwd=str(ROOT), tools=dict(tools))


def seed_servers() -> dict[str, ServerConfig]:
    return {
        "env-query": stdio_server(
            "servers.env_query",
            get_environment_status=ToolOverride(triggers=["air", "environment", "weather"]),
        ),
        "geo-simulator": stdio_server(
            "servers.geo_simulator",
            simulate_geolocation=ToolOverride(triggers=["near", "nearby", "location"]),
        ),
    }


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(scope="module")
async def loop_host() -> AsyncIterator[MCPHost]:
    """The loop-test server plus the two seed servers, each a real subprocess, shared by a module."""
    servers = {
        "loop": stdio_server("tests.loop_server", broken=ToolOverride(timeout=5)),
        **seed_servers(),
    }
    host = MCPHost(servers, default_timeout=10.0)
    await host.start()
    try:
        yield host
    finally:
        await host.aclose()

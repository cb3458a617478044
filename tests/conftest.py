"""Shared fixtures: real MCP servers as stdio subprocesses, a real store on a temp SQLite file (or, for
tests marked both_stores, on PostgreSQL too)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.store.base import ConversationStore
from tests.mcp_servers.warm_start import ADDRESS_VARIABLE
from tests.pg_schemas import drop_stale_schemas
from tests.ports import unused_port
from tests.stores import TEST_DATABASE_URL, Backend, SQLiteBackend, default_backend, postgres_backend

# A stuck test names the coroutine it is stuck in.
pytest_plugins = ["tests.stuck_tasks"]

ROOT = Path(__file__).resolve().parent.parent


def stdio_server(module: str, **tools: ToolOverride) -> ServerConfig:
    """A server started as `python -m module` from the repository root; one of ours, whose read-only
    claims the operator trusts (`trustAnnotations`), as the shipped servers file marks its own."""
    return ServerConfig(
        command=sys.executable, args=["-m", module], cwd=str(ROOT), tools=dict(tools), trustAnnotations=True
    )


def seed_servers() -> dict[str, ServerConfig]:
    """nerve's own two servers, started warm (`tests/mcp_servers/warm_start.py`)."""
    return {
        "env-query": stdio_server(
            "tests.mcp_servers.env_query",
            get_environment_status=ToolOverride(triggers=["air", "environment", "weather"]),
        ),
        "geo-simulator": stdio_server(
            "tests.mcp_servers.geo_simulator",
            simulate_geolocation=ToolOverride(triggers=["near", "nearby", "location"]),
        ),
    }


# The test files that take longest, longest first (measured with --durations=0). `make test` runs
# files in parallel (--dist loadfile) in the order collected: one long file begun last would hold
# the whole run up alone at its end, so these begin first and the many short files fill in behind.
LONGEST_FIRST = (
    "test_schedule_kill.py",
    "test_kill_restart.py",
    "test_ask_contract.py",
    "test_slack_posted_once.py",
    "test_sign_in.py",
    "test_fuzz_tool_arguments.py",
    "test_slack_one_channel_burst.py",
    "test_postgres_outage.py",
    "test_discord_schedules.py",
    "test_jobs.py",
    "test_mcp_faults.py",
    "test_schedule_jobs.py",
    "test_terminal.py",
    "test_schedule_runner.py",
    "test_memory.py",
    "test_thread_lock.py",
    "test_slack_burst.py",
    "test_approvals.py",
    "test_schedule_tools.py",
    "test_mcp_lifecycle.py",
    "test_slack_shutdown.py",
    "test_cli.py",
    "test_replicas.py",
    "test_discord_shards.py",
    "test_slack_inputs.py",
    "test_person_data.py",
    "test_secrets_nowhere.py",
    "test_slack_sign_in.py",
    "test_inputs.py",
    "test_asks_core.py",
    "test_mcpsec.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the others by their number of tests (as xdist would order
    them), each file's tests in their own order."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    last = len(rank)
    items.sort(key=lambda item: (rank.get(item.path.name, last), -counts[item.path.name], item.path.name))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Drop the PostgreSQL schemas killed runs left behind (`tests/pg_schemas.py`): once per run,
    by the controller when the tests run in xdist workers."""
    url = os.environ.get(TEST_DATABASE_URL, "").strip()
    if not url or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        dropped = drop_stale_schemas(url)
    except psycopg.Error:
        return  # the PostgreSQL tests fail on their own, saying the server cannot be reached
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if dropped and reporter is not None:
        reporter.write_line(f"dropped {len(dropped)} test schema(s) left behind by killed runs")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_stores: run the test on SQLite and on PostgreSQL (the store_backend fixture)"
    )
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _start_fork_server()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _fork_server is not None:
        _fork_server.communicate(timeout=30)  # its stdin closes: it kills what still runs and ends
        shutil.rmtree(Path(os.environ.pop(ADDRESS_VARIABLE)).parent, ignore_errors=True)


_fork_server: subprocess.Popen[str] | None = None
SERVE_FORKS = "import sys; from tests.mcp_servers.warm_start import serve; serve(sys.argv[1])"


def _start_fork_server() -> None:
    """One fork server for the whole run, before the xdist workers start, so that they and every
    `nerve` process they start inherit its address (`tests/mcp_servers/warm_start.py`)."""
    global _fork_server
    address = Path(tempfile.mkdtemp(prefix="nerve-warm-")) / "fork.sock"
    # In its own environment too: a server that a warm `nerve` (a child of the fork server) starts
    # finds the address there (`tests/mcp_servers/warm_start.py`).
    _fork_server = subprocess.Popen(
        [sys.executable, "-c", SERVE_FORKS, str(address)],
        cwd=ROOT,
        env={**os.environ, ADDRESS_VARIABLE: str(address)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert _fork_server.stdout is not None
    if _fork_server.stdout.readline().strip() != "ready":
        raise RuntimeError("the test MCP servers' fork server did not start")
    os.environ[ADDRESS_VARIABLE] = str(address)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked both_stores that use the store run once per database; others stay on SQLite."""
    if "store_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("store_backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
async def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh database: SQLite unless the test is parametrised onto PostgreSQL (both_stores)."""
    param = getattr(request, "param", None)
    if param == "sqlite":
        yield SQLiteBackend(tmp_path / "nerve.db")
        return
    if param == "postgres":
        async with postgres_backend() as backend:
            yield backend
        return
    async with default_backend(tmp_path) as backend:  # NERVE_TEST_STORE decides
        yield backend


@pytest.fixture
async def store(store_backend: Backend) -> AsyncIterator[ConversationStore]:
    opened = await store_backend.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(scope="module")
async def loop_host() -> AsyncIterator[MCPHost]:
    """The loop-test server plus the two seed servers, each a real subprocess, shared by a module."""
    servers = {
        "loop": stdio_server("tests.mcp_servers.loop", broken=ToolOverride(timeout=5)),
        **seed_servers(),
    }
    host = MCPHost(servers, default_timeout=10.0)
    # Every server up before the first test, however the machine's load spreads their starts (the
    # host's own grace gives the others only as long again as the first took).
    await host.start(grace=60.0, limit=60.0)
    try:
        yield host
    finally:
        await host.aclose()


@pytest.fixture(scope="module")
def remote_kit() -> Iterator[int]:
    """A real Streamable HTTP MCP server (the test kit) on 127.0.0.1 for the module; its port."""
    port = unused_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers.testkit", "streamable-http", str(port)],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "TESTKIT_NAME": "remote"},
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the test kit did not start"
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)

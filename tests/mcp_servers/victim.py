"""A test MCP server to kill: it tells its process id, and `wait` holds a call open until it dies.

Run as `python -m tests.mcp_servers.victim` with `VICTIM_STATE` naming a directory it may write to:
each `wait` call writes `waiting` there once it is running, so a test knows the call reached the
server before it sends SIGKILL.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server import MCPServer
from mcp_types import ToolAnnotations

STATE = Path(os.environ["VICTIM_STATE"])
server = MCPServer("victim", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
async def wait() -> str:
    """Say it is running (the `waiting` file holds the process id), then never answer."""
    # Written whole, then renamed: a test that sees the file never reads it half written.
    (STATE / "waiting.new").write_text(str(os.getpid()))
    (STATE / "waiting.new").replace(STATE / "waiting")
    await anyio.sleep_forever()
    return "unreachable"


if __name__ == "__main__":
    server.run("stdio")

"""A test MCP server with one tool per misbehaviour the host must survive.

Run as `python -m tests.mcp_servers.testkit [stdio|streamable-http PORT]`. `TESTKIT_NAME` names the
instance, so two copies (with colliding tool names) can tell which one answered.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

NAME = os.environ.get("TESTKIT_NAME", "testkit")
server = MCPServer(NAME, log_level="WARNING")
# Tools that only answer (or wait) are marked read-only, so calls to them run without a prompt;
# `release`, `crash` and `add_tool` change the server and carry no annotations.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

_gates: dict[str, anyio.Event] = {}
_arrivals: dict[str, anyio.Event] = {}
_hang_cancelled = anyio.Event()


def _gate(key: str) -> anyio.Event:
    return _gates.setdefault(key, anyio.Event())


def _arrival(key: str) -> anyio.Event:
    return _arrivals.setdefault(key, anyio.Event())


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
def whoami() -> str:
    """The instance name (TESTKIT_NAME)."""
    return NAME


@server.tool(annotations=READ_ONLY)
async def block(key: str) -> str:
    """Wait until `release(key)` is called; proves two calls run at the same time."""
    _arrival(key).set()
    await _gate(key).wait()
    return f"released {key}"


@server.tool(annotations=READ_ONLY)
async def wait_for_blocked(key: str) -> bool:
    """True once a `block(key)` call is waiting on the server (waits up to 5 s for it)."""
    with anyio.move_on_after(5):
        await _arrival(key).wait()
    return _arrival(key).is_set()


@server.tool()
def release(key: str) -> str:
    """Open the gate a `block(key)` call waits on."""
    _gate(key).set()
    return f"opened {key}"


@server.tool(annotations=READ_ONLY)
async def hang() -> str:
    """Never answer; records that the client cancelled it."""
    try:
        await anyio.sleep_forever()
    finally:
        _hang_cancelled.set()
    return "unreachable"


@server.tool(annotations=READ_ONLY)
async def hang_was_cancelled() -> bool:
    """True once a `hang` call has been cancelled by the client (waits up to 5 s for it)."""
    with anyio.move_on_after(5):
        await _hang_cancelled.wait()
    return _hang_cancelled.is_set()


@server.tool()
def crash() -> str:
    """Kill the server process mid-call."""
    os._exit(1)


@server.tool(structured_output=False, annotations=READ_ONLY)
def huge(size: int) -> str:
    """A text result of `size` characters (a repeating, checkable pattern)."""
    pattern = "0123456789abcdef"
    return (pattern * (size // len(pattern) + 1))[:size]


@server.tool(annotations=READ_ONLY)
def fail() -> str:
    """A deliberate execution failure."""
    raise ToolError("the database is down")


@server.tool(annotations=READ_ONLY)
def rate_limited() -> str:
    """A failure that says it is rate limited."""
    raise ToolError("Rate limit exceeded (HTTP 429). Retry after 7 seconds.")


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers (server-side validation rejects non-integers)."""
    return a + b


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool called `name` and tell the client the tool list changed."""
    server.add_tool(lambda: f"I am {name}", name=name, description=f"Added at run time: {name}")
    await ctx.notify_tools_changed()  # 2026-07-28 connections (subscriptions/listen)
    await ctx.session.send_tool_list_changed()  # older connections
    return f"added {name}"


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(sys.argv) > 2 and sys.argv[1] == "streamable-http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()

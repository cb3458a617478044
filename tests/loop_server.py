"""An MCP server for the agent-loop tests, run as a real stdio subprocess.

`wait_and_echo` finishes after the delay it is given, so a test can make calls finish in the reverse
of the order the model asked for them; `broken` always fails; `flaky_rate_limit` is rate limited on
its first call only; `big` returns a large JSON document.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

# Every tool here only answers: calls run without a prompt.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server() -> MCPServer:
    server = MCPServer("loop-tools", log_level="WARNING")
    calls = {"flaky": 0}

    @server.tool(annotations=READ_ONLY)
    async def wait_and_echo(
        label: str, delay_ms: Annotated[int, Field(ge=0, le=5000)] = 0
    ) -> dict[str, object]:
        """Wait `delay_ms`, then return the label."""
        await anyio.sleep(delay_ms / 1000)
        return {"label": label, "delay_ms": delay_ms}

    @server.tool(annotations=READ_ONLY)
    async def broken(reason: str = "the backend is down") -> str:
        """Always fails."""
        raise ToolError(f"backend error: {reason}")

    @server.tool(annotations=READ_ONLY)
    async def flaky_rate_limit() -> str:
        """Rate limited on the first call, fine after."""
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise ToolError("rate limit exceeded (429), retry after 0.05 seconds")
        return "served on the second try"

    @server.tool(annotations=READ_ONLY)
    async def big(items: Annotated[int, Field(ge=1, le=100000)] = 2000) -> dict[str, object]:
        """A large result with many records."""
        records = [{"id": i, "name": f"record {i}", "note": "x" * 40} for i in range(items)]
        return {"total": items, "status": "ok", "records": records}

    return server


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    build_server().run("stdio")


if __name__ == "__main__":
    main()

"""A low-level MCP server that lists its tools over three pages, to test cursor following."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

PAGES = [["page_one_a", "page_one_b"], ["page_two"], ["page_three"]]


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    page = int(params.cursor) if params is not None and params.cursor else 0
    tools = [
        types.Tool(
            name=name,
            description=f"Tool {name}",
            input_schema={"type": "object", "properties": {}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        )
        for name in PAGES[page]
    ]
    next_cursor = str(page + 1) if page + 1 < len(PAGES) else None
    return types.ListToolsResult(tools=tools, next_cursor=next_cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


async def main() -> None:
    server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

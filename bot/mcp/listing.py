"""Listing a server's tools and prompts, page after page.

Its own module because the listing is bounded against a server that pages forever, and both a new
connection and a "lists changed" notice list the same way.
"""

from __future__ import annotations

import mcp_types
from mcp import Client

from bot.mcp.catalog import ListedTool

# A server that keeps handing out cursors stops being listed after this many pages.
MAX_TOOL_PAGES = 100


async def list_all_tools(client: Client) -> tuple[ListedTool, ...]:
    """Every tool, following pagination cursors (bounded, so a server that loops cannot hang us)."""
    tools: list[ListedTool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(
            ListedTool(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema,
                annotations=None
                if t.annotations is None
                else t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True),
            )
            for t in page.tools
        )
        cursor = page.next_cursor
        if cursor is None or cursor in seen:
            break
        seen.add(cursor)
    return tuple(tools)


async def list_all_prompts(client: Client) -> tuple[mcp_types.Prompt, ...]:
    """Every prompt, following cursors (bounded); none when the server offers no prompts."""
    if client.server_capabilities.prompts is None:
        return ()
    prompts: list[mcp_types.Prompt] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_prompts(cursor=cursor)
        prompts.extend(page.prompts)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(prompts)

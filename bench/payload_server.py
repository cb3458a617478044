"""payload: a stdio MCP server for the benchmarks, with tools of known cost and known output size.

* `fetch_report(query)` and `fetch_listing(query)` return about 5 KB of deterministic JSON for a
  query, like a search or a database tool does. A long thread of such calls is what makes a request
  grow; two tools let a thread alternate between them.
* `echo(text)` costs nothing, so a turn that calls it measures only the bot's own overhead.

Run it with `python -m bench.payload_server`; stdout carries JSON-RPC, so it never prints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from typing import Any

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

_WORDS = (
    "north", "harbour", "cedar", "station", "garden", "river", "market", "bridge", "summit", "lotus",
    "willow", "quarry", "meadow", "canal", "orchard", "beacon",
)  # fmt: skip
_CATEGORIES = ("park", "cafe", "library", "clinic", "gym", "school", "pharmacy", "museum")
RECORDS = 30


def _digest(kind: str, query: str, index: int) -> bytes:
    return hashlib.sha256(f"{kind}:{query}:{index}".encode()).digest()


def report_id(kind: str, query: str) -> str:
    """The id a payload carries; the benchmark's model quotes it to show it read the latest result."""
    return f"{kind[:3].upper()}-{hashlib.sha256(f'{kind}:{query}'.encode()).hexdigest()[:12]}"


def payload(kind: str, query: str) -> dict[str, Any]:
    """About 5 KB of JSON for `query`: the same query always gives the same bytes."""
    records = []
    for index in range(RECORDS):
        d = _digest(kind, query, index)
        name = f"{_WORDS[d[0] % len(_WORDS)].title()} {_WORDS[d[1] % len(_WORDS)].title()}"
        records.append(
            {
                "id": f"{kind[:1]}{index:03d}-{d[2:5].hex()}",
                "name": name,
                "category": _CATEGORIES[d[5] % len(_CATEGORIES)],
                "score": round(int.from_bytes(d[6:8], "big") / 655.36, 2),
                "lat": round(31.0 + d[8] / 255.0, 5),
                "lng": round(121.0 + d[9] / 255.0, 5),
                "open": bool(d[10] & 1),
                "tags": [_WORDS[b % len(_WORDS)] for b in d[11:13]],
            }
        )
    return {
        "report_id": report_id(kind, query),
        "query": query,
        "kind": kind,
        "total": RECORDS,
        "records": records,
        "source": "simulated",
    }


def as_result(data: dict[str, Any]) -> CallToolResult:
    """The same JSON as text and as structured content, so every client sees the same bytes."""
    text = json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def build_server() -> MCPServer:
    server = MCPServer("payload", version="1.0.0", log_level="WARNING")
    # Every tool only answers: a benchmark measures calls, not approvals.
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(
        description="A report of about 30 records matching a query (about 5 KB of JSON).",
        annotations=read_only,
    )
    async def fetch_report(query: str) -> CallToolResult:
        return as_result(payload("report", query))

    @server.tool(
        description="A listing of about 30 places matching a query (about 5 KB of JSON).",
        annotations=read_only,
    )
    async def fetch_listing(query: str) -> CallToolResult:
        return as_result(payload("listing", query))

    @server.tool(description="Returns the text it was given; costs nothing.", annotations=read_only)
    async def echo(text: str) -> str:
        return text

    return server


def main() -> None:
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    build_server().run("stdio")


if __name__ == "__main__":
    main()

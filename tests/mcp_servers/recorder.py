"""A test MCP server that writes down everything it is given and checks it against its own schemas.

Its tools declare strict JSON schemas (bounds, patterns, enums, nested objects, `anyOf`, `$ref`,
`additionalProperties: false`): the shapes a model gets wrong. Each call is validated here with
jsonschema against the schema the tool declared, the way a careful server would, and appended to
LOG as one JSON line: the tool, the arguments exactly as received, the request's `_meta`, and the
problems found (none, if nerve's own checks hold). At start it also writes down its environment,
so a test can tell what a stdio server is handed besides its arguments.

Run as `python -m tests.mcp_servers.recorder LOG`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

SCHEMAS: dict[str, dict[str, Any]] = {
    "lookup": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "maxLength": 100, "pattern": "^[A-Z0-9]+$"},
            "count": {"type": "integer", "minimum": 1, "maximum": 100},
            "unit": {"type": "string", "enum": ["m", "km"]},
        },
        "required": ["code"],
        "additionalProperties": False,
    },
    "measure": {
        "type": "object",
        "properties": {
            "value": {"type": "number", "exclusiveMinimum": 0},
            "ratio": {"type": "number", "maximum": 1},
            "flags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 5, "uniqueItems": True},
            "label": {"type": ["string", "null"], "minLength": 2},
        },
        "required": ["value"],
    },
    "filter_rows": {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {
                    "field": {"type": "string", "minLength": 1},
                    "op": {"enum": ["eq", "lt", "gt"]},
                    "values": {
                        "type": "array",
                        "items": {"type": ["string", "number", "null"]},
                        "minItems": 1,
                    },
                },
                "required": ["field", "op"],
                "additionalProperties": False,
            },
            "limit": {"type": "integer", "multipleOf": 10},
        },
        "required": ["filter"],
    },
    "place": {
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
        "properties": {
            "at": {"$ref": "#/$defs/point"},
            "target": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0}]},
            "kind": {"const": "pin"},
        },
        "required": ["at"],
    },
    "anything": {"type": "object"},
}

LOG: Path | None = None


def _write(entry: dict[str, Any]) -> None:
    if LOG is not None:
        with LOG.open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry, ensure_ascii=True) + "\n")


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tools = [
        types.Tool(
            name=name,
            description=f"The {name} tool: every argument is checked against its schema.",
            input_schema=schema,
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        for name, schema in SCHEMAS.items()
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments
    schema = SCHEMAS.get(params.name)
    if schema is None:
        problems = [f"unknown tool {params.name}"]
    else:
        validator = Draft202012Validator(schema)
        problems = [error.message[:300] for error in validator.iter_errors(arguments)]
    meta = params.meta if isinstance(params.meta, dict | None) else params.meta.model_dump(mode="json")
    _write({"tool": params.name, "arguments": arguments, "meta": meta, "problems": problems})
    text = "invalid: " + "; ".join(problems) if problems else "ok"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=bool(problems))


async def main() -> None:
    server = Server("recorder", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        LOG = Path(sys.argv[1])
    _write({"environment": dict(os.environ)})
    anyio.run(main)

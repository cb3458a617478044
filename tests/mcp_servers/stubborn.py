"""A test MCP server, written on bare JSON-RPC, that does what the SDK's servers never do.

The SDK's server stops a handler when the client cancels and never answers a cancelled request. This
one keeps going: `late(seconds)` answers after `seconds` whatever the client said meanwhile, and
`endless` reports progress every 0.1 s and never answers. Every message it receives is appended to
the JSON Lines file `STUBBORN_LOG`, so a test can see that `notifications/cancelled` really arrived.

It speaks the initialize handshake (2025-era protocol) over stdio, one JSON object per line, and
answers `server/discover` with "method not found", so a client in auto mode falls back to it.

Tools: `echo(text)`, `late(seconds)` (answers "late answer after N s"), `endless`.
Run as `python -m tests.mcp_servers.stubborn`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

LOG = os.environ["STUBBORN_LOG"]
PROTOCOL = "2025-11-25"
TOOLS = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "late",
        "description": "Answer after `seconds`, even when the call was cancelled meanwhile.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "endless",
        "description": "Report progress every 0.1 s and never answer.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
]

_out = threading.Lock()
_cancelled: set[Any] = set()


def send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def record(message: dict[str, Any]) -> None:
    with _out, open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"at": time.time(), "message": message}) + "\n")


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def late(request_id: Any, seconds: float) -> None:
    time.sleep(seconds)
    answer(request_id, text_result(f"late answer after {seconds:g} s"))


def endless(request_id: Any, token: Any) -> None:
    step = 0
    while request_id not in _cancelled:
        step += 1
        if token is not None:
            params = {"progressToken": token, "progress": step, "message": f"still working ({step})"}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        time.sleep(0.1)


def call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        answer(request_id, text_result(str(arguments.get("text", ""))))
    elif name == "late":
        threading.Thread(target=late, args=(request_id, float(arguments["seconds"])), daemon=True).start()
    elif name == "endless":
        threading.Thread(target=endless, args=(request_id, token), daemon=True).start()
    else:
        answer(request_id, {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method == "notifications/cancelled":
        _cancelled.add(params.get("requestId"))
    if request_id is None or method is None:
        return  # a notification, or an answer to something we never asked
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": params.get("protocolVersion", PROTOCOL),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stubborn", "version": "1.0"},
            },
        )
    elif method == "tools/list":
        answer(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        call(request_id, params)
    elif method in ("ping", "logging/setLevel"):
        answer(request_id, {})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        record(message)
        handle(message)


if __name__ == "__main__":
    main()

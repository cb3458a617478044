"""A test MCP server, on bare JSON-RPC, whose answers a client cannot read as they are.

`garble(kind)` answers with a line that is:
- `bytes`: JSON whose text holds bytes that are not UTF-8 (`caf\\xe9`);
- `surrogate`: JSON whose text holds a lone surrogate escape (`\\ud800`), which pydantic refuses;
- `broken`: not JSON at all, though its start names the request's id;
- `noise`: a line of non-UTF-8 noise with no id, followed by a normal answer ("after noise").
`echo(text)` answers normally, to show the session still works afterwards.

With `GARBLED_STUBBORN=1` it ignores SIGTERM and keeps running after its stdin ends, as a server
that will not stop. `GARBLED_PID` names a file it writes its process id to.

Speaks the 2025-era initialize handshake over stdio. Run as `python -m tests.mcp_servers.garbled`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

PROTOCOL = "2025-11-25"
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
TOOLS = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": READ_ONLY,
    },
    {
        "name": "garble",
        "description": "Answer with a line of the given kind: bytes, surrogate, broken or noise.",
        "inputSchema": {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]},
        "annotations": READ_ONLY,
    },
]


def write(line: bytes) -> None:
    sys.stdout.buffer.write(line + b"\n")
    sys.stdout.buffer.flush()


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message).encode("ascii"))


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def garble(request_id: Any, kind: str) -> None:
    if kind == "bytes":
        head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text_result("@@")})
        write(head.encode("ascii").replace(b"@@", b"caf\xe9 ok"))
    elif kind == "surrogate":
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("a\ud800b ok")})
    elif kind == "broken":
        write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"content": [')
    elif kind == "noise":
        write(b"\xff\xfe starting up \x80")
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result("after noise")})


def call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "echo":
        send({"jsonrpc": "2.0", "id": request_id, "result": text_result(str(arguments.get("text", "")))})
    elif name == "garble":
        garble(request_id, str(arguments.get("kind")))
    else:
        result = {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if request_id is None or method is None:
        return
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", PROTOCOL),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbled", "version": "1.0"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        call(request_id, params)
    elif method in ("ping", "logging/setLevel"):
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def main() -> None:
    stubborn = os.environ.get("GARBLED_STUBBORN") == "1"
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if pid_file := os.environ.get("GARBLED_PID"):
        Path(pid_file).write_text(str(os.getpid()))
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))
    while stubborn:
        time.sleep(60)


if __name__ == "__main__":
    main()

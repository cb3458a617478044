"""The notes server (servers/notes_oauth), with every HTTP request it receives written down.

Each request to its MCP endpoint and to its authorization server becomes one JSON line in the file
named by `NOTES_TRAFFIC`: method, path, query string, headers and body, as they arrived. A test can
then tell exactly what a client sent this server: its own bearer token, and nothing that belongs to
anyone else (a chat platform's token, the model provider's key, another server's token).

Run as `python -m tests.mcp_servers.recorded_notes …` with the notes server's own options.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import servers.notes_oauth.app as notes_app
from servers.notes_oauth.__main__ import main

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Recorded:
    """ASGI middleware: passes every request on unchanged, writing it down once its body is read."""

    def __init__(self, app: ASGIApp, traffic: Path) -> None:
        self.app = app
        self.traffic = traffic

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        written = False
        entry = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
        }

        def write() -> None:
            nonlocal written
            if not written:
                written = True
                self._write({**entry, "body": body.decode("utf-8", "replace")})

        async def reading() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    write()
            return message

        try:
            await self.app(scope, reading, send)
        finally:
            write()  # a request whose body was never read (a GET) is written down all the same

    def _write(self, entry: dict[str, Any]) -> None:
        with self.traffic.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _recording_servers(traffic: Path) -> None:
    serve = notes_app._server

    def recorded(app: Any, *, lifespan: Any) -> Any:
        return serve(Recorded(app, traffic), lifespan=lifespan)  # type: ignore[arg-type]

    notes_app._server = recorded


if __name__ == "__main__":
    _recording_servers(Path(os.environ["NOTES_TRAFFIC"]))
    sys.exit(main())

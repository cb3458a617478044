"""An HTTP proxy with fault switches, in front of a real Streamable HTTP MCP server.

The faults a remote MCP server shows in practice happen between nerve and the server: a connection
reset, a gateway's 502, a stream cut off mid-answer, a session the server no longer knows (404).
This proxy passes requests through to the server unchanged until a fault is armed; then the next
matching request (by JSON-RPC method) meets it:

* `reset`: the connection is closed with a TCP reset before any answer;
* `502`: a gateway's "502 Bad Gateway", the server never sees the request;
* `cut`: the server's answer starts (status line, headers, the first bytes of the body) and the
  connection then closes mid-answer;
* `404`: the request reaches the server with a session id it never issued, so the server itself
  answers 404 "Session not found", as it does after a restart.

Every request is handled on its own upstream connection (`Connection: close` both ways), which
keeps the relay simple. Runs in the test's event loop: `async with FaultProxy(upstream) as proxy`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

Fault = Literal["reset", "502", "cut", "404"]
BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
    b"Connection: close\r\n\r\nBad Gateway"
)
# Bytes of the answer's body passed on before a `cut` closes the connection.
CUT_AFTER = 16
MAX_HEAD = 64 * 1024


@dataclass
class Armed:
    fault: Fault
    method: str
    times: int


@dataclass
class Seen:
    """One request through the proxy: its JSON-RPC method (or the HTTP method) and what it met."""

    method: str
    fault: Fault | None


@dataclass
class FaultProxy:
    upstream_port: int
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    _armed: list[Armed] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def arm(self, fault: Fault, *, method: str = "tools/call", times: int = 1) -> None:
        """The next `times` requests with JSON-RPC `method` meet `fault`."""
        self._armed.append(Armed(fault, method, times))

    def met(self, fault: Fault) -> int:
        return sum(1 for seen in self.seen if seen.fault == fault)

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy is closing
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            return False
        lines = head.decode("latin-1").split("\r\n")
        request_line, headers = lines[0], [line for line in lines[1:] if line]
        length = next(
            (int(line.split(":", 1)[1]) for line in headers if line.lower().startswith("content-length:")), 0
        )
        body = await reader.readexactly(length) if length else b""
        method = _rpc_method(body) or request_line.split(" ", 1)[0]
        fault = self._take(method)
        self.seen.append(Seen(method, fault))
        if fault == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault == "502":
            writer.write(BAD_GATEWAY)
            await writer.drain()
            return False
        kept = [
            line
            for line in headers
            if not line.lower().startswith(("connection:", "keep-alive:"))
            and not (fault == "404" and line.lower().startswith("mcp-session-id:"))
        ]
        if fault == "404":
            kept.append("mcp-session-id: 0123456789abcdef-never-issued")
        kept.append("Connection: close")
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            upstream_writer.write(("\r\n".join([request_line, *kept]) + "\r\n\r\n").encode("latin-1") + body)
            await upstream_writer.drain()
            if fault == "cut":
                answer_head = await upstream_reader.readuntil(b"\r\n\r\n")
                writer.write(answer_head + await upstream_reader.read(CUT_AFTER))
                await writer.drain()
                writer.transport.abort()
                return False
            while chunk := await upstream_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            upstream_writer.close()
            with contextlib.suppress(ConnectionError):
                await upstream_writer.wait_closed()
        return False  # the answer said Connection: close

    def _take(self, method: str) -> Fault | None:
        for armed in self._armed:
            if armed.method == method and armed.times > 0:
                armed.times -= 1
                return armed.fault
        return None


def _rpc_method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None

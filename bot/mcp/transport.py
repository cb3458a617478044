"""The wire to one server: stdio, Streamable HTTP or SSE, watched for the server side ending.

Its own module because each kind of transport has its own rules (a stdio process started early,
HTTP only to the addresses `bot.mcp.address_guard` allows, long-silent SSE streams), while the link
above only needs streams to read and write and a call when they end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCResponse

from bot.mcp.address_guard import http_client
from bot.mcp.early_start import EarlyServer
from bot.mcp.server_config import ServerConfig
from bot.mcp.stderr import StderrTap
from bot.mcp.stdio import stdio_transport

TransportStreams = tuple[Any, Any]
# Long-lived HTTP streams (SSE) legitimately stay silent for minutes.
STREAM_READ_TIMEOUT = 300.0


async def open_transport(
    name: str,
    config: ServerConfig,
    stack: AsyncExitStack,
    *,
    connect_timeout: float,
    auth: httpx2.Auth | None,
    on_response: Callable[[httpx2.Response], Awaitable[None]],
    tap: StderrTap | None,
    early: EarlyServer | None = None,
) -> AbstractAsyncContextManager[TransportStreams]:
    """The transport `config` names; an HTTP client it needs is entered on `stack`, and each of its
    responses is shown to `on_response` (Streamable HTTP only)."""
    if config.kind == "stdio":
        assert tap is not None
        return stdio_transport(
            stdio_parameters(config),
            server=name,
            errlog=tap.writer,
            started=early.process if early is not None else None,
        )
    assert config.url is not None
    if config.kind == "sse":

        def guarded(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return http_client(
                config.allow_private_network,
                allow_insecure_http=config.allow_insecure_http,
                server_url=config.url,
                headers=headers,
                timeout=timeout,
                auth=auth,
            )

        return sse_client(
            config.url,
            headers=config.headers or None,
            timeout=connect_timeout,
            sse_read_timeout=STREAM_READ_TIMEOUT,
            auth=auth,
            httpx_client_factory=guarded,
        )
    # Every request of this client (redirects and OAuth discovery too) goes to public addresses
    # only, unless the entry allows private ones, and over plain http off this machine only when
    # the entry allows it and the request carries no credential (`bot.mcp.address_guard`).
    http = http_client(
        config.allow_private_network,
        allow_insecure_http=config.allow_insecure_http,
        server_url=config.url,
        headers=config.headers,
        timeout=httpx2.Timeout(connect_timeout, read=STREAM_READ_TIMEOUT),
        auth=auth,
        event_hooks={"response": [on_response]},
    )
    await stack.enter_async_context(http)
    return streamable_http_client(config.url, http_client=http)


def stdio_parameters(config: ServerConfig) -> StdioServerParameters:
    """How a stdio server's process is started, from its entry."""
    assert config.command is not None
    return StdioServerParameters(command=config.command, args=config.args, env=config.env, cwd=config.cwd)


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams], on_lost: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    """The transport's streams, with `on_lost` called once the server side ends.

    The SDK fails pending requests when a connection ends but tells nobody else; the host needs to
    know at once so it can restart the server before the next call arrives.
    """
    async with transport as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            try:
                async with send:
                    async for item in read_stream:
                        await send.send(_complete_by_default(item))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                on_lost()

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            try:
                yield receive, write_stream
            finally:
                group.cancel_scope.cancel()
                receive.close()


def _complete_by_default(item: Any) -> Any:
    """A result without `resultType` is a complete one: the specification says so, and the SDK's
    2026-07-28 validation would otherwise refuse a tool's answer as unreadable."""
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
        result = item.message.result
        if isinstance(result, dict):
            result.setdefault("resultType", "complete")
    return item

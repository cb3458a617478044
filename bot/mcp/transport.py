"""The wire to one server (stdio, Streamable HTTP or SSE), watched for its end, and why it failed,
dug out of the exception groups and causes the SDK and anyio wrap it in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import anyio
import httpx2
from mcp import MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import CONNECTION_CLOSED, JSONRPCResponse

from bot.mcp.address_guard import Refused, entry_client
from bot.mcp.early_start import EarlyServer
from bot.mcp.server_config import ServerConfig
from bot.mcp.stderr import StderrTap
from bot.mcp.stdio import stdio_transport
from bot.types import SignInNeeded

TransportStreams = tuple[Any, Any]
# Long-lived HTTP streams (SSE) legitimately stay silent for minutes.
STREAM_READ_TIMEOUT = 300.0
NEEDS_AUTH_ENTRY = (
    'needs sign-in: add an auth entry for it in the servers file, e.g. "auth": {"type": "oauth",'
    ' "identity": "user"}'
)


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
    """The transport `config` names; its HTTP client is entered on `stack`."""
    if config.kind == "stdio":
        assert tap is not None
        started = early.process if early is not None else None
        return stdio_transport(config, server=name, errlog=tap.writer, started=started)
    assert config.url is not None
    if config.kind == "sse":
        return sse_client(
            config.url,
            headers=config.headers or None,
            timeout=connect_timeout,
            sse_read_timeout=STREAM_READ_TIMEOUT,
            auth=auth,
            httpx_client_factory=partial(entry_client, config),
        )
    # Every request of this client (redirects and OAuth discovery too) goes to public addresses
    # only, unless the entry allows private ones, and over plain http off this machine only when
    # the entry allows it and the request carries no credential (`bot.mcp.address_guard`).
    http = entry_client(
        config,
        headers=config.headers,
        timeout=httpx2.Timeout(connect_timeout, read=STREAM_READ_TIMEOUT),
        auth=auth,
        event_hooks={"response": [on_response]},
    )
    await stack.enter_async_context(http)
    return streamable_http_client(config.url, http_client=http)


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams], on_lost: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    """The streams, with `on_lost` called once the server side ends (the SDK tells only pending requests)."""
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
    """A result without `resultType` is complete (the specification), which the SDK would refuse."""
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
        result = item.message.result
        if isinstance(result, dict):
            result.setdefault("resultType", "complete")
    return item


def address_refused(exc: BaseException) -> Refused | None:
    """The refusal a failed attempt stopped at, wherever in the groups and causes it is."""
    return next((found for found in _linked(exc) if isinstance(found, Refused)), None)


def sign_in_needed(exc: BaseException) -> SignInNeeded | None:
    """The sign-in a failed attempt stopped at (per-person OAuth), wherever in the groups it is."""
    asked = (getattr(found, "sign_in", None) for found in _linked(exc))
    return next((needed for needed in asked if isinstance(needed, SignInNeeded)), None)


def _linked(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, the exceptions of its groups and their causes and contexts, each once."""
    seen: list[BaseException] = [exc]
    visited: set[int] = set()
    while seen:
        found = seen.pop()
        if id(found) in visited:
            continue
        visited.add(id(found))
        yield found
        if isinstance(found, BaseExceptionGroup):
            seen.extend(found.exceptions)
        seen.extend(linked for linked in (found.__cause__, found.__context__) if linked is not None)


def describe_failure(exc: BaseException) -> str:
    """A short reason an operator can act on, from whatever the attempt raised."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"could not be started: {exc.strerror or 'command not found'}: {exc.filename}"
    if isinstance(exc, PermissionError):
        return f"could not be started: permission denied: {exc.filename}"
    if isinstance(exc, OSError):
        return f"could not be started: {exc}"
    if isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED:
        return "closed the connection during start-up"
    if isinstance(exc, httpx2.HTTPError):
        return f"could not be reached: {type(exc).__name__}: {exc}"
    return f"failed: {type(exc).__name__}: {exc}"

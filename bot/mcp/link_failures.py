"""Why an attempt to reach a server failed, in words an operator can act on.

Its own module because the reason is dug out of exception groups, causes and contexts (the SDK and
anyio wrap what went wrong), and it reaches the log, `nerve doctor` and tool results alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
from mcp import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from bot.mcp.address_guard import Refused
from bot.types import SignInNeeded

NEEDS_AUTH_ENTRY = (
    'needs sign-in: add an auth entry for it in the servers file, e.g. "auth": {"type": "oauth",'
    ' "identity": "user"}'
)


def address_refused(exc: BaseException) -> Refused | None:
    """The refusal a failed attempt stopped at (an address inside the network, plain http), wherever
    in the groups and causes it is."""
    return next((found for found in _linked(exc) if isinstance(found, Refused)), None)


def sign_in_needed(exc: BaseException) -> SignInNeeded | None:
    """The sign-in a failed attempt stopped at (per-person OAuth), wherever in the groups it is."""
    for found in _linked(exc):
        needed = getattr(found, "sign_in", None)
        if isinstance(needed, SignInNeeded):
            return needed
    return None


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

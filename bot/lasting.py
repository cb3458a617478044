"""Writes that must land even when whoever started them is being cancelled.

A question cancelled because its call ended, a claim given back by a resume that stopped: if the
write is dropped, the store keeps saying the opposite (a question still open, a turn still being
resumed). `asyncio.shield` alone does not keep the caller waiting: a second cancel lets it go at
once while the write goes on unawaited, and anyio cancel scopes (the MCP SDK runs a server's
requests in them) cancel again on every await. The caller's owner (a shutdown) then closes the
store under the write. `finish_anyway` keeps the caller until the write is done, then lets the
cancellation go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def finish_anyway(write: Coroutine[Any, Any, T]) -> T:
    """Run `write` to its end however often the caller is cancelled meanwhile; then its result,
    or CancelledError when the caller was cancelled (its error, if it failed, either way)."""
    task = asyncio.ensure_future(write)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                cancelled = True
                continue
            if task.cancelled():
                raise
            cancelled = True
            result = task.result()
        break
    if cancelled:
        raise asyncio.CancelledError
    return result

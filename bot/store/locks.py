"""Per-key FIFO locks: work for one conversation runs one at a time, in arrival order."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

from bot.types import holding

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """Dropped when nobody holds or waits for it; asyncio.Lock wakes waiters in the order they asked."""

    def __init__(self) -> None:
        self._locks: dict[K, tuple[asyncio.Lock, int]] = {}

    def users(self, key: K) -> int:
        """Holders and waiters of `key`'s lock."""
        return self._locks.get(key, (None, 0))[1]

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                with holding(key, uuid.uuid4().hex):
                    yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

"""Writes complete rounds to a store as fast as it can, printing after each commit.

Run as `python tests/store_worker.py DB_PATH_OR_URL [FIRST_ROUND]`; the crash test SIGKILLs it at an
arbitrary moment and then checks that every round the worker reported is stored whole.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path

from bot.store.base import ConversationStore
from bot.store.choose import POSTGRES_SCHEMES, open_postgres_store
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, ToolCall

KEY = ConversationKey(platform="crash", workspace="w", channel="c", thread="t")
CALLS_PER_ROUND = 3


def round_messages(i: int) -> list[ChatMessage]:
    """An assistant message with tool calls followed by one result per call."""
    calls = tuple(
        ToolCall(
            id=f"call_{i}_{j}", name="get_environment_status", arguments=json.dumps({"area_code": i * 10 + j})
        )
        for j in range(CALLS_PER_ROUND)
    )
    results = [
        ChatMessage(role="tool", tool_call_id=call.id, name=call.name, content="ok " * 100, latency_ms=1.5)
        for call in calls
    ]
    return [ChatMessage(role="assistant", tool_calls=calls), *results]


async def open_store_at(location: str) -> ConversationStore:
    """The store at a PostgreSQL URL, or else at a SQLite file path."""
    if location.startswith(POSTGRES_SCHEMES):
        return await open_postgres_store(location)
    return await SQLiteStore.open(Path(location))


async def main(location: str, first: int) -> None:
    async with await open_store_at(location) as store:
        for i in itertools.count(first):
            await store.append(KEY, [ChatMessage(role="user", content=f"question {i}")], event_id=f"ev{i}")
            await store.append(KEY, round_messages(i))
            print(f"round {i}", flush=True)
            await store.append(KEY, [ChatMessage(role="assistant", content=f"answer {i}")])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0))

"""A second nerve process for the cross-process tests, run as a subprocess.

`python -m tests.turn_worker agent DB MCP_CONFIG MODEL_URL` opens the runtime as `nerve` does and
answers one line of stdin (`{"event_id": …, "text": …}`) per turn in the thread `KEY`, all of them
concurrently, printing `{"event_id": …, "text": <answer>}` per answer; it exits after stdin closes
and every turn is answered.

`python -m tests.turn_worker hold DB LEASE_SECONDS` holds `KEY`'s turn lock, prints `holding`, and
waits to be killed; `hold-configured DB` does the same on the store the settings (environment) open.

DB is a SQLite file, or a postgresql:// URL.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bot.config import Settings
from bot.runtime import open_runtime
from bot.store.choose import open_configured_store, open_postgres_store
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Incoming
from tests.proc_output import say_json

KEY = ConversationKey(platform="slack", workspace="W1", channel="C1", thread="1600000000.000100")


async def answer_lines(db: str, mcp_config: Path, model_url: str) -> None:
    where = {"nerve_database_url": db} if db.startswith("postgresql://") else {"nerve_db": Path(db)}
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        **where,
        nerve_mcp_config=mcp_config,
        openai_base_url=model_url,
        openai_api_key="test-key",
        nerve_model="test-model",
        nerve_llm_max_retries=0,
    )
    async with open_runtime(settings) as runtime:
        print("ready", flush=True)
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

        async def answer(line: bytes) -> None:
            asked = json.loads(line)
            incoming = Incoming(key=KEY, text=asked["text"], user_id="U1", event_id=asked["event_id"])
            reply = await runtime.agent.reply(incoming)
            say_json({"event_id": asked["event_id"], "text": reply.text})

        async with asyncio.TaskGroup() as turns:
            while line := await reader.readline():
                turns.create_task(answer(line))


async def hold(db: str, lease: float) -> None:
    """On PostgreSQL there is no lease: a killed holder's lock goes with its connection."""
    store = (
        await open_postgres_store(db)
        if db.startswith("postgresql://")
        else await SQLiteStore.open(Path(db), turn_lease_seconds=lease)
    )
    async with store, store.turn_lock.hold(KEY):
        print("holding", flush=True)
        await asyncio.Event().wait()


async def hold_configured(db: str) -> None:
    store = await open_configured_store(Settings(_env_file=None, nerve_db=Path(db)))  # type: ignore[call-arg]
    async with store, store.turn_lock.hold(KEY):
        print("holding", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1] == "agent":
        asyncio.run(answer_lines(sys.argv[2], Path(sys.argv[3]), sys.argv[4]))
    elif sys.argv[1] == "hold-configured":
        asyncio.run(hold_configured(sys.argv[2]))
    else:
        asyncio.run(hold(sys.argv[2], float(sys.argv[3])))

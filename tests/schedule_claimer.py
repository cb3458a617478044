"""Claims every slot of some schedules, as one process of several would, and prints those it won.

Run as `python tests/schedule_claimer.py DB_PATH_OR_URL SCHEDULE_IDS FIRST_SLOT SLOTS SEED`; it opens
the store, prints "ready", waits for a line on stdin (so that every process starts claiming at once),
claims each (schedule, slot) in an order of its own, and prints the ones it won as JSON.
"""

from __future__ import annotations

import asyncio
import random
import sys

from tests.proc_output import say_json
from tests.store_worker import open_store_at


async def main(location: str, ids: list[str], first: float, slots: int, seed: int) -> None:
    attempts = [(sid, first + i * 3600.0) for sid in ids for i in range(slots)]
    random.Random(seed).shuffle(attempts)
    async with await open_store_at(location) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        claims = await asyncio.gather(
            *(store.claim_slot(sid, slot, at=slot, late_by=0.0) for sid, slot in attempts)
        )
    say_json([pair for pair, won in zip(attempts, claims, strict=True) if won])


if __name__ == "__main__":
    location, ids, first, slots, seed = sys.argv[1:6]
    asyncio.run(main(location, ids.split(","), float(first), int(slots), int(seed)))

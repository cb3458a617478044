"""Which Discord shards one process runs: `NERVE_DISCORD_SHARDS` read into shard ids.

A large bot splits its guilds over `NERVE_DISCORD_SHARD_COUNT` gateway connections; several nerve
processes each run some of them. Operators write the ids as ranges and lists (`0-3`, `0,2,5`,
`0-3,8`), so each mistake is named with the part that is wrong: a shard run twice would receive every
event twice, and one at or past the count is refused by Discord with a closed gateway.
"""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+)(?:\s*-\s*(\d+))?")


def parse_shard_ids(text: str, count: int) -> list[int]:
    """The ids `text` names, in its order; ValueError with the offending part otherwise."""
    ids: list[int] = []
    seen: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise ValueError(f"{text!r} has an empty entry; write ids like 0-3 or 0,2,5")
        match = _PART.fullmatch(part)
        if match is None:
            raise ValueError(f"{part!r} is not a shard id or a range like 0-3")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"{part!r} runs backwards; write the lower id first")
        for shard in range(first, last + 1):
            if shard >= count:
                raise ValueError(
                    f"shard {shard} does not exist with NERVE_DISCORD_SHARD_COUNT={count}"
                    f" (ids run from 0 to {count - 1})"
                )
            if shard in seen:
                raise ValueError(f"shard {shard} is named twice; each shard runs in one place")
            seen.add(shard)
            ids.append(shard)
    return ids

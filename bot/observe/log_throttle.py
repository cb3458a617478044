"""At most one log line per key and period, with a count of the ones held back.

What an outsider controls (malformed requests, unreadable server output) must not fill the disk.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

# Keys remembered at most; the oldest are forgotten first (a flood from many peers stays bounded).
MAX_KEYS = 1024


class LogThrottle:
    def __init__(self, every: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        # key -> (when the last line was written, lines held back since)
        self._seen: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()

    def allow(self, key: Hashable) -> int | None:
        """None: hold this line back; else write it, with the count of lines held back for `key`."""
        now = self._clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self._every:
            self._seen[key] = (last[0], last[1] + 1)
            return None
        held = last[1] if last is not None else 0
        self._seen[key] = (now, 0)
        self._seen.move_to_end(key)
        while len(self._seen) > MAX_KEYS:
            self._seen.popitem(last=False)
        return held


def held_back(count: int) -> str:
    return f" ({count} more like it held back)" if count else ""

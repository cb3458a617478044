"""Ports for the servers tests start on 127.0.0.1.

A port the kernel hands out (bind to port 0, then let it go) comes from the ephemeral range, which
the kernel also hands to every outgoing connection. On a busy machine another test's connection can
take it before the server binds it, and the server fails with "address already in use". Ports below
that range are never given to outgoing connections, so only another test picking the same number at
the same moment could collide, and a pick is checked to be free first.
"""

from __future__ import annotations

import random
import socket

# Below the ephemeral range of Linux (32768–60999 by default) and of macOS (49152–65535).
LOWEST, ABOVE_HIGHEST = 20000, 32000


def unused_port() -> int:
    """A loopback port nothing is bound to now, outside the range outgoing connections use."""
    for _ in range(100):
        port = random.randrange(LOWEST, ABOVE_HIGHEST)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port between {LOWEST} and {ABOVE_HIGHEST} on 127.0.0.1")

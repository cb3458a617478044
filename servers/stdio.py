"""What every seed server does to run over stdio: log to stderr only, read its delay setting."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping

from mcp.server import MCPServer

logger = logging.getLogger(__name__)


def delay_from_env(environ: Mapping[str, str], own_variable: str) -> float:
    """The answer delay in seconds: the server's own variable wins over `NERVE_SEED_DELAY_MS`."""
    for name in (own_variable, "NERVE_SEED_DELAY_MS"):
        raw = environ.get(name, "").strip()
        if raw:
            try:
                return max(0.0, float(raw) / 1000.0)
            except ValueError:
                logger.warning("%s=%r is not a number of milliseconds; ignoring it", name, raw)
    return 0.0


def serve_stdio(build_server: Callable[[float], MCPServer], *, own_delay_variable: str) -> None:
    """Run a server on stdin/stdout; stdout carries JSON-RPC only, so every log line goes to stderr."""
    # Configured before MCPServer does it, so records go to stderr as plain lines.
    logging.basicConfig(
        level=os.environ.get("NERVE_SEED_LOG_LEVEL", "WARNING").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    build_server(delay_from_env(os.environ, own_delay_variable)).run("stdio")

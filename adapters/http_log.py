"""The log of nerve's HTTP server: one short WARNING per malformed request, never the client's bytes.

aiohttp logs such a request as an ERROR with a traceback quoting what the client sent: hundreds of KB
from anyone who can reach the port. A fault of nerve's own keeps its ERROR and traceback.
"""

from __future__ import annotations

import logging
import re

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler

from adapters.terminal.safe import printable
from bot.errors import ConfigError
from bot.observe.log_context import fields
from bot.observe.log_throttle import LogThrottle, held_back

# Seconds between two lines about one peer's malformed requests.
WARN_EVERY = 10.0
MAX_REASON = 200
MAX_PATH = 100

logger = logging.getLogger(__name__)
# What aiohttp's request handlers log through (the `logger=` of an AppRunner): see `serve_app`.
SERVER_LOG = logging.getLogger(f"{__name__}.server")
# aiohttp's own logger still decides which of its other lines are shown.
_AIOHTTP = logging.getLogger("aiohttp.server")
_THROTTLE = LogThrottle(WARN_EVERY)
# Where the parser starts quoting the client's bytes in its message.
_QUOTE = re.compile(r":?\s*(?:bytearray\()?b['\"]")


def reason(exc: HttpProcessingError) -> str:
    lines = exc.message.strip().splitlines()
    said = _QUOTE.split(lines[0], maxsplit=1)[0].rstrip(": ") if lines else ""
    text = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
    return printable(text)[:MAX_REASON]


def warn_malformed(peer: str, why: str, method: str = "", path: str = "") -> None:
    """One line for a malformed request, unless this peer had one within WARN_EVERY s."""
    held = _THROTTLE.allow(peer)
    if held is None:
        return
    request = f" {printable(method)[:16]} {printable(path)[:MAX_PATH]}" if method else ""
    logger.warning(
        "refused a malformed HTTP request%s from %s: %s%s",
        request,
        peer,
        why,
        held_back(held),
        extra=fields("http_malformed_request"),
    )


class MalformedRequests(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return _AIOHTTP.isEnabledFor(record.levelno)
        args = record.args if isinstance(record.args, tuple) else ()
        warn_malformed(str(args[0]) if args else "an unknown peer", reason(exc))
        return False


SERVER_LOG.setLevel(logging.DEBUG)  # aiohttp logs the first bad request of a connection at DEBUG
SERVER_LOG.addFilter(MalformedRequests())


@web.middleware
async def malformed_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A body garbled or broken off: one line naming the request, and a 400."""
    try:
        return await handler(request)
    except HttpProcessingError as exc:
        why = reason(exc)
    except ConnectionResetError:
        why = f"the connection closed before the body's {request.content_length} bytes (Content-Length) came"
    warn_malformed(request.remote or "an unknown peer", why, request.method, request.path)
    return web.json_response({"error": "malformed request"}, status=400)


async def serve_app(
    app: web.Application, host: str, port: int, serves: str = ""
) -> tuple[web.AppRunner, str]:
    """One of nerve's HTTP apps, started at `host:port` with no access log and malformed requests
    logged as above: its runner (for `cleanup`) and base URL. A port it cannot take is a ConfigError."""
    app.middlewares.append(malformed_bodies)
    runner = web.AppRunner(app, access_log=None, logger=SERVER_LOG)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(
            f"cannot listen on {host}:{port} (NERVE_HTTP_HOST, NERVE_HTTP_PORT){serves}: {exc.strerror}"
        ) from None
    bound = runner.addresses[0]
    return runner, f"http://{bound[0]}:{bound[1]}"

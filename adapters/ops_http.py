"""`/healthz`, `/readyz` and `/metrics` for orchestrators and Prometheus.

`/readyz` is 503 with the reasons (settings and servers named, never their values) until the database,
the platform and an MCP server answer, and from SIGTERM on, so nothing new reaches a process on its way
out. A port that cannot be bound stops the start: a probe of missing endpoints would only restart the
process without saying why. `nerve chat` serves them only when NERVE_HTTP_PORT is set explicitly (a
bot often holds the default port).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from aiohttp import web

from adapters.http_log import serve_app
from bot.config import Settings
from bot.errors import ConfigError
from bot.observe import metrics

if TYPE_CHECKING:
    from bot.agent import Agent

logger = logging.getLogger(__name__)

SHUTTING_DOWN = "shutting down"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
# The database probe reads the inbox for a platform nobody uses: one indexed read, no rows; a store
# with a pool of connections (PostgreSQL) answers `SELECT 1` on one instead.
PROBE_PLATFORM = "readyz-probe"
DATABASE_TIMEOUT = 2.0
DATABASE_UNREACHABLE = "database unreachable"

Probe = Callable[[], bool | Awaitable[bool]]


WORKER_DOWN = "the job worker is not taking jobs (starting, restarting after a failure, or draining)"


@runtime_checkable
class Pings(Protocol):
    """A store that can be asked whether its database answers (the caller bounds the wait)."""

    async def ping(self) -> None: ...


class PlatformLink:
    """Whether the front end is connected to its platform; it says how to tell once it connects."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._probe: Probe | None = None
        self._was_up = False

    def connected(self, probe: Probe) -> None:
        self._probe = probe

    async def problem(self) -> str | None:
        up = False
        if self._probe is not None:
            try:
                answer = self._probe()
                up = await answer if inspect.isawaitable(answer) else answer
            except Exception:
                logger.debug("the %s connection probe failed", self.name, exc_info=True)
        self._was_up = self._was_up or up
        if up:
            return None
        if self._was_up:
            return f"the connection to {self.name} is down"
        return f"not connected to {self.name} yet"


def always() -> bool:
    """The probe of a front end with no connection to lose (the terminal, an HTTP app answering now)."""
    return True


@dataclass(eq=False)
class OpsEndpoints:
    agent: Agent
    platform: PlatformLink
    _: KW_ONLY
    ready: asyncio.Future[str] | None = None
    # Set on SIGTERM: from then on the process is not ready, whatever else holds.
    stopping: asyncio.Event | None = None
    # More routes served beside these on the same port (the sign-in callback): each adds its own.
    routes: list[Callable[[web.Application], None]] = field(default_factory=list, init=False)
    # With jobs shared on PostgreSQL: whether this process's worker is taking jobs.
    worker: Callable[[], bool] | None = field(default=None, init=False)

    def install(self, app: web.Application) -> None:
        app.router.add_get(HEALTH_PATH, self._health)
        app.router.add_get(READY_PATH, self._readiness)
        app.router.add_get(METRICS_PATH, self._metrics)
        for add_routes in self.routes:
            add_routes(app)

    def announce(self, base_url: str) -> None:
        logger.info("serving %s, %s and %s at %s", HEALTH_PATH, READY_PATH, METRICS_PATH, base_url)
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(base_url)

    @contextlib.asynccontextmanager
    async def serving(self, host: str, port: int, *, alone: bool = True) -> AsyncIterator[str | None]:
        """Serve the endpoints at `host:port`, yielding their URL; not `alone`, the front end's app does."""
        if not alone:
            yield None
            return
        app = web.Application()
        self.install(app)
        serves = f" for {HEALTH_PATH}, {READY_PATH} and {METRICS_PATH}"
        runner, url = await serve_app(app, host, port, serves)
        try:
            self.announce(url)
            yield url
        finally:
            await runner.cleanup()

    async def reasons(self) -> list[str]:
        if self.stopping is not None and self.stopping.is_set():
            return [SHUTTING_DOWN]
        found = [
            problem for problem in (await self._database_problem(), await self.platform.problem()) if problem
        ]
        if self.worker is not None and not self.worker():
            found.append(WORKER_DOWN)
        # No servers configured is a deployment without tools, ready as it is; servers configured
        # and none of them connected is not.
        servers = self.agent.server_states()
        if servers and not any(servers.values()):
            found.append(f"no MCP server is ready ({', '.join(sorted(servers))} down)")
        return found

    async def _database_problem(self) -> str | None:
        inbox = self.agent.inbox
        try:
            async with asyncio.timeout(DATABASE_TIMEOUT):
                if isinstance(inbox, Pings):
                    await inbox.ping()
                else:
                    await inbox.unfinished_events(PROBE_PLATFORM)
        except TimeoutError:
            return f"{DATABASE_UNREACHABLE}: no answer within {DATABASE_TIMEOUT:g} s"
        except Exception as exc:
            logger.debug("the database probe failed", exc_info=True)
            return f"{DATABASE_UNREACHABLE}: {type(exc).__name__}"
        return None

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _readiness(self, request: web.Request) -> web.Response:
        found = await self.reasons()
        return web.json_response({"ready": not found, "reasons": found}, status=503 if found else 200)

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(request.headers.get("Accept", ""))
        response = web.Response(body=body)
        # Set whole: aiohttp's `content_type` argument refuses parameters (version, charset, escaping).
        response.headers["Content-Type"] = content_type
        return response


@contextlib.asynccontextmanager
async def chat_ops(agent: Agent, settings: Settings) -> AsyncIterator[str | None]:
    """The endpoints beside `nerve chat` when NERVE_HTTP_PORT is set (a taken port is a warning)."""
    if "nerve_http_port" not in settings.model_fields_set:
        yield None
        return
    ops = OpsEndpoints(agent, PlatformLink("the terminal"))
    ops.platform.connected(always)
    async with contextlib.AsyncExitStack() as stack:
        url: str | None = None
        try:
            url = await stack.enter_async_context(
                ops.serving(settings.nerve_http_host, settings.nerve_http_port)
            )
        except ConfigError as exc:
            logger.warning("%s; the chat goes on without them", exc.message)
        yield url

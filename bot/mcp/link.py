"""One MCP server's connection, kept alive by one task (S1, S14), and its tools listed.

`run()` enters and exits the client in this one task, as anyio's cancel scopes require, and
reopens it after a backoff when it drops; other tasks use the open session, which MCP allows."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Literal, cast

import anyio
import anyio.abc
import httpx2
import jsonschema  # noqa: F401 - loaded up front: the client's first output-schema check would pay ~100 ms
import mcp_types
from mcp import Client, MCPError
from mcp.client import Transport
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from bot.mcp import transport
from bot.mcp.catalog import ListedTool, list_all_prompts, list_all_tools
from bot.mcp.circuit import Circuit, CircuitPolicy
from bot.mcp.early_start import EarlyServer, claim
from bot.mcp.server_config import ServerConfig
from bot.mcp.server_messages import Callers, ServerMessages
from bot.mcp.stderr import StderrTap
from bot.mcp.stdio import server_environment, stop_server
from bot.observe import metrics
from bot.observe.log_context import fields
from bot.types import SignInNeeded

logger = logging.getLogger(__name__)

Mode = Literal["auto", "legacy"]
# What signs a remote server's HTTP requests in (an OAuth provider), made per link; None: nothing.
AuthFactory = Callable[[str, ServerConfig], httpx2.Auth | None]
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
# A connection that lived this long (or answered a call) was healthy: the next failure starts the
# backoff afresh.
HEALTHY_AFTER = 60.0
CLIENT_INFO = mcp_types.Implementation(name="nerve", version="0.1.0")


class ServerLink:
    """A server's live client (or why there is none) and the tools it last listed."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        mode: Mode,
        connect_timeout: float,
        on_change: Callable[[], None],
        auth: httpx2.Auth | None = None,
        personal: bool = False,
        circuit: CircuitPolicy | None = None,
    ) -> None:
        self.name = name
        # One person's link: when it needs them to sign in, it stops until they have (the host
        # opens a new one). A shared link keeps trying, so an admin's `nerve connect` is picked up.
        self.personal = personal
        self.config = config
        self.auth = auth
        self._mode = mode
        self._connect_timeout = connect_timeout
        self._on_change = on_change
        self.client: Client | None = None
        # The last listing survives a restart, so tool names stay stable while the server is away.
        self.tools: tuple[ListedTool, ...] = ()
        self.prompts: tuple[mcp_types.Prompt, ...] = ()
        self.listed = False
        self.problem: str | None = None
        # The server wants its person to sign in (per-person OAuth): the link stops until they have.
        self.sign_in: SignInNeeded | None = None
        self._challenged = False
        # The server wrote to stderr during the last attempt (the lines are in the log, not here).
        self.stderr_seen = False
        # An asyncio (not anyio) event: a host may be built before the event loop runs.
        self._changed = asyncio.Event()
        # Start-up attempts that never got as far as listing tools; calls waiting on a restart watch it.
        self.failed_attempts = 0
        # When the next attempt starts (event-loop clock) while waiting out the backoff, else None.
        self.retry_at: float | None = None
        self._delay = BACKOFF_FIRST
        self._connected = False
        self._stop: anyio.CancelScope | None = None  # made in run(): anyio needs a running loop
        self._stopping = False
        self._wake = asyncio.Event()
        self._refresh_wanted = False
        self._lost = False
        # The calls in flight, so what the server asks mid-call reaches the person it is for.
        self.callers = Callers()
        self._messages = ServerMessages(name, self.callers, self.request_refresh)
        # Calls pause after repeated crashes of the running server (`bot.mcp.circuit`); each link
        # has its own. Failed starts are not counted: the restart backoff deals with those.
        self.circuit = Circuit(name, circuit)
        metrics.watch_circuit(name, self.circuit)
        # Why the server's address was refused (`bot.mcp.address_guard`): calls fail at once with it.
        self.refused: str | None = None
        # The server answered 404 to the session's id: it forgot the session (restarted, expired).
        self.session_expired = False
        self._renewing = False
        # The last HTTP error status a remote server (or a gateway before it) answered, e.g.
        # "HTTP 502 Bad Gateway": the SDK reports such answers without their status.
        self.http_failure: str | None = None

    @property
    def ready(self) -> bool:
        return self.client is not None

    @property
    def attempted(self) -> bool:
        """Whether an attempt has ended or succeeded: until then there is neither a client nor a problem."""
        return self.client is not None or self.problem is not None

    def stop(self) -> None:
        """Ask `run()` to close the client and return; safe to call before it started."""
        self._stopping = True
        metrics.server_up(self.name, False)
        metrics.forget_circuit(self.name, self.circuit)
        if self._stop is not None:
            self._stop.cancel()
        self._notify()

    def note_success(self) -> None:
        """A call was answered: the server is healthy, so a later crash starts the backoff afresh."""
        self._delay = BACKOFF_FIRST

    async def wait_ready(self, within: float) -> Client | None:
        """The client once the restart under way succeeds; None if it fails or takes over `within` s.
        One attempt's outcome only: a call to a server in a crash loop is not held for the backoff."""
        deadline = anyio.current_time() + within
        failures = self.failed_attempts
        while self.client is None:
            if self._stopping or self.failed_attempts > failures or (self.retry_at or 0.0) > deadline:
                return None
            try:
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
            except TimeoutError:
                return None
        return self.client

    async def renew_session(self, stale: Client, within: float) -> Client | None:
        """A new session once the server forgot `stale` (HTTP 404); calls that met it share one."""
        if self.client is stale:
            self._renewing = True
            self._connection_lost()
        return await self.wait_ready(within)

    def request_refresh(self) -> None:
        self._refresh_wanted = True
        self._wake.set()

    async def run(self) -> None:
        """Keep the server connected until `stop()`; never raises except on cancellation."""
        last_reason = ""
        with anyio.CancelScope() as self._stop:
            if self._stopping:
                self._stop.cancel()
            while True:
                started = anyio.current_time()
                self._connected = False
                try:
                    reason = await self._run_once()
                except Exception as exc:  # one net per attempt, so a bug here cannot stop the restarts
                    logger.exception("MCP server %r: unexpected failure", self.name)
                    reason = transport.describe_failure(exc)
                if anyio.current_time() - started > HEALTHY_AFTER:
                    self._delay = BACKOFF_FIRST
                renewing, self._renewing = self._renewing, False
                # A session the server forgot is opened again at once: nothing is wrong with it.
                wait = 0.0 if renewing else self._delay * random.uniform(0.8, 1.2)
                self.retry_at = anyio.current_time() + wait
                if not self._connected:
                    self.failed_attempts += 1
                metrics.server_up(self.name, False)
                self.client = None
                self.problem = reason
                self._notify()
                if self.sign_in is not None and self.personal:
                    logger.info("MCP server %r waits for %s to sign in", self.name, self.sign_in.person)
                    return
                # Said once per reason: a server that stays down must not flood the terminal.
                level = logging.DEBUG if reason == last_reason else logging.WARNING
                see_log = f" (its stderr is logged as bot.mcp.stderr.{self.name})" if self.stderr_seen else ""
                logger.log(level, "MCP server %r %s; retrying in %.1f s%s", self.name, reason, wait, see_log)
                last_reason = reason
                await anyio.sleep(wait)
                self.retry_at = None
                metrics.server_restart(self.name)
                if not renewing:
                    self._delay = min(self._delay * 2, BACKOFF_MAX)

    async def _run_once(self) -> str:
        early = None
        tap = None
        if self.config.kind == "stdio":  # its process, when the command line started it already
            early = await claim(self.name, self.config, server_environment(self.config.env))
            tap = early.tap if early is not None else StderrTap(self.name)
        if early is not None:
            logger.debug(
                "MCP server %r: connecting to the process started early (%d)",
                self.name,
                early.process.pid,
                extra=fields("mcp_server_started_early", server=self.name),
            )
        try:
            async with anyio.create_task_group() as pumps:
                if tap is not None:
                    pumps.start_soon(tap.pump)
                try:
                    reason = await self._connect_and_serve(tap, early)
                finally:
                    if tap is not None:
                        tap.close_writer()
                    # Let the stderr reader catch the last lines (a crash's traceback), briefly.
                    pumps.cancel_scope.deadline = anyio.current_time() + 0.5
        finally:
            if tap is not None:
                tap.close()
            if early is not None and early.process.returncode is None:
                # Cancelled before its transport took it over: never leave the process behind.
                with anyio.CancelScope(shield=True):
                    await stop_server(early.process, self.name)
        # Stderr stays in the log: the reason reaches tool results, and through them people.
        self.stderr_seen = tap is not None and bool(tap.tail)
        if tap is not None and not self._connected:
            tap.report_failed_start()
        return reason

    async def _connect_and_serve(self, tap: StderrTap | None, early: EarlyServer | None = None) -> str:
        self._challenged = False
        self.session_expired = False
        self.sign_in = None
        self._lost = False
        self._refresh_wanted = False
        self._wake.clear()
        started = anyio.current_time()
        try:
            with anyio.CancelScope(deadline=started + self._connect_timeout) as handshake:
                async with AsyncExitStack() as stack:
                    wire = await transport.open_transport(
                        self.name,
                        self.config,
                        stack,
                        connect_timeout=self._connect_timeout,
                        auth=self.auth,
                        on_response=self._watch_for_challenge,
                        tap=tap,
                        early=early,
                    )
                    client = Client(
                        cast(Transport, transport.watched(wire, self._connection_lost)),
                        mode=self._mode,
                        message_handler=self._messages.on_message,
                        cache=None,
                        client_info=CLIENT_INFO,
                        elicitation_callback=self._messages.on_elicit,
                        logging_callback=self._messages.on_log,
                        log_level="info",
                    )
                    await stack.enter_async_context(client)
                    if tap is not None:
                        tap.close_writer()
                    listeners = await stack.enter_async_context(anyio.create_task_group())
                    await listeners.start(self._listen, client)
                    await self._list(client)
                    self.listed = True
                    handshake.deadline = math.inf
                    self._set_ready(client, anyio.current_time() - started)
                    await self._serve(client)
                    return (
                        "forgot the session; opening a new one" if self._renewing else "closed the connection"
                    )
            return f"did not finish starting within {self._connect_timeout:g} s"
        except Exception as exc:
            if (refused := transport.address_refused(exc)) is not None:
                self.refused = str(refused)
                return f"was not contacted: {refused}"
            if (needed := transport.sign_in_needed(exc)) is not None:
                self.sign_in = needed
                if self.personal:
                    return "needs its person to sign in"
                return f"needs sign-in: an admin runs `nerve connect {self.name}`"
            if self._challenged:
                return transport.NEEDS_AUTH_ENTRY
            return transport.describe_failure(exc)

    async def _serve(self, client: Client) -> None:
        """Wait for the connection to drop, re-listing tools whenever the server says they changed."""
        while not self._lost:
            await self._wake.wait()
            self._wake.clear()
            if self._refresh_wanted and not self._lost:
                self._refresh_wanted = False
                try:
                    with anyio.fail_after(self._connect_timeout):
                        await self._list(client)
                except (MCPError, TimeoutError) as exc:
                    logger.warning("MCP server %r: could not re-list tools: %s", self.name, exc)
                    continue
                logger.info(
                    "MCP server %r: lists changed, now %d tools and %d prompts",
                    self.name,
                    len(self.tools),
                    len(self.prompts),
                )
                self._on_change()

    async def _list(self, client: Client) -> None:
        self.tools = await list_all_tools(client)
        self.prompts = await list_all_prompts(client)

    async def _listen(self, client: Client, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """On a 2026-07-28 connection change events come only through `subscriptions/listen`."""
        offered = client.server_capabilities
        tools = bool(offered.tools and offered.tools.list_changed)
        prompts = bool(offered.prompts and offered.prompts.list_changed)
        started = False
        try:
            # Older connections deliver notifications/*/list_changed to `ServerMessages.on_message`.
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS and (tools or prompts):
                async with client.listen(tools_list_changed=tools, prompts_list_changed=prompts) as events:
                    task_status.started()
                    started = True
                    async for event in events:
                        if isinstance(event, ToolsListChanged | PromptsListChanged):
                            self.request_refresh()
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
            logger.info("MCP server %r: no tool-change events (%s)", self.name, exc)
        finally:
            if not started:
                task_status.started()

    def _connection_lost(self) -> None:
        # Calls from now on get "unavailable" at once instead of a closed session's error.
        was_ready = self.client is not None
        self.client = None
        self._lost = True
        self._wake.set()
        if was_ready:
            if not self._renewing and not self._stopping:
                # Counted the moment it is seen: a call right after a crash must already meet the circuit.
                self.circuit.record_failure()
            self.problem = "lost the connection"
            metrics.server_up(self.name, False)
            self._notify()

    async def _watch_for_challenge(self, response: httpx2.Response) -> None:
        """Note a 401 the servers file has no sign-in for (the SDK says only "error response")."""
        if response.status_code == 401 and self.auth is None and "www-authenticate" in response.headers:
            self._challenged = True
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            self.session_expired = True
        if response.status_code >= 500:
            self.http_failure = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        elif response.status_code < 400:
            self.http_failure = None

    def _set_ready(self, client: Client, elapsed: float) -> None:
        self.client = client
        self.problem = None
        self.refused = None
        self._connected = True
        metrics.server_up(self.name, True)
        self.stderr_seen = False
        logger.info(
            "MCP server %r ready in %.0f ms: %d tools, protocol %s",
            self.name,
            elapsed * 1000,
            len(self.tools),
            client.protocol_version,
        )
        self._notify()

    def _notify(self) -> None:
        """Wake calls waiting on a restart, and let the host rebuild its catalog."""
        self._changed.set()
        self._changed = asyncio.Event()
        self._on_change()

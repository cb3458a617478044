"""The MCP host: every configured server, its tools offered to the model, calls routed back (S1–S3, S14, S15).

One `ServerLink` task per server owns its client and restarts it; the host keeps the combined
catalog and routes each call to its server's link."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Self

import anyio
import mcp_types
from mcp import MCPError

from bot.errors import PromptError
from bot.mcp import results
from bot.mcp.calls import Call, LinkCalls
from bot.mcp.catalog import build_catalog, prompt_specs, prompt_text, unmatched_overrides
from bot.mcp.circuit import CircuitPolicy
from bot.mcp.link import AuthFactory, Mode, ServerLink
from bot.mcp.personal import CONNECT_TOOL, NEEDS_SIGN_IN, PersonalServers
from bot.mcp.server_config import ServerConfig
from bot.observe.log_context import server_context
from bot.types import CallContext, PromptSpec, SignInNeeded, ToolResult, ToolSpec

if TYPE_CHECKING:  # the OAuth client loads only when a server signs in
    from bot.mcp.auth.sign_ins import SignIns

logger = logging.getLogger(__name__)

# Worst case of the SDK's stdio shutdown: flush, 2 s grace, SIGTERM, 2 s, SIGKILL, 2 s reap.
CLOSE_TIMEOUT = 10.0
# How long start() waits for the servers' first attempts. Servers launched together come up
# together, so once one is ready the others get as long again as it took (at least STARTUP_GRACE):
# a loaded machine slows them all alike. STARTUP_LIMIT bounds the wait in any case.
STARTUP_GRACE = 2.0
STARTUP_LIMIT = 10.0
STILL_STARTING = "still starting"


class MCPHost:
    """The `ToolHost` over real MCP servers. Use as `async with MCPHost(servers) as host:`."""

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        default_timeout: float = 30.0,
        connect_timeout: float = 15.0,
        mode: Mode = "auto",
        max_call_seconds: float = 600.0,
        auth: AuthFactory | None = None,
        sign_ins: SignIns | None = None,
        circuit: CircuitPolicy | None = None,
    ) -> None:
        self._servers = dict(servers)
        self._default_timeout = default_timeout
        self._calls = LinkCalls(max_call_seconds=max_call_seconds, still_offered=self._still_offered)

        make_link = partial(
            ServerLink, mode=mode, connect_timeout=connect_timeout, on_change=self._changed, circuit=circuit
        )
        personal = {n: c for n, c in self._servers.items() if sign_ins is not None and sign_ins.per_person(n)}
        # Servers whose calls carry each person's own sign-in: no shared link (`bot.mcp.personal`).
        self._personal = PersonalServers(personal, sign_ins, make_link) if sign_ins and personal else None
        self._links = {
            name: make_link(name, config, auth=auth(name, config) if auth is not None else None)
            for name, config in self._servers.items()
            if name not in personal
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._catalog: dict[str, ToolSpec] = {}
        self._prompts: dict[str, PromptSpec] = {}
        self._change = asyncio.Event()
        self._warned: set[str] = set()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self, *, grace: float = STARTUP_GRACE, limit: float = STARTUP_LIMIT) -> None:
        """Start every server; return once each has made its first attempt, or as STARTUP_GRACE says."""
        if self._tasks:
            raise RuntimeError("MCPHost.start() was already called")
        started = time.perf_counter()
        # Each connection runs in its server's log context: every line written for it, the SDK's
        # own included, can name the server.
        self._tasks = [
            asyncio.create_task(link.run(), name=f"mcp-server:{name}", context=server_context(name))
            for name, link in self._links.items()
        ]
        try:
            if self._personal is not None:
                await self._personal.start()
                self._changed()
            await self._first_attempts(grace, limit)
        except BaseException:
            await self.aclose()  # cancelled while starting (Ctrl-C): leave no children behind
            raise
        ready = sum(link.ready for link in self._links.values())
        elapsed = (time.perf_counter() - started) * 1000
        logger.info("MCP host: %d of %d servers ready in %.0f ms", ready, len(self._links), elapsed)
        for name, reason in self.problems():
            logger.info("MCP server %r is not available: %s", name, reason)

    async def _first_attempts(self, grace: float, limit: float) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + limit
        graced = False
        while self.starting():
            if not graced and any(link.ready for link in self._links.values()):
                graced = True
                now = loop.time()
                deadline = min(deadline, now + max(grace, now - began))
            try:
                async with asyncio.timeout_at(deadline):
                    await self._change.wait()
            except TimeoutError:
                return

    async def aclose(self) -> None:
        """Stop every server and wait (bounded) until its process is gone."""
        if self._personal is not None:
            await self._personal.aclose()
        for link in self._links.values():
            link.stop()
        tasks, self._tasks = self._tasks, []
        if not tasks:
            return
        try:
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
        except asyncio.CancelledError:
            # Cancelled while closing (Ctrl-C): still give the children their bounded shutdown.
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
            raise
        for task in pending:
            logger.warning(
                "MCP host: %s did not stop within %.0f s; cancelling it", task.get_name(), CLOSE_TIMEOUT
            )
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)

    def problems(self) -> list[tuple[str, str]]:
        """Servers that are not connected right now, with the reason (for operators, not the model)."""
        found = []
        for name, link in self._links.items():  # a ready link has attempted, and has no problem
            if not link.attempted:
                found.append((name, STILL_STARTING))
            elif link.problem is not None:
                see_log = "; see the log for its stderr" if link.stderr_seen else ""
                found.append((name, link.problem + see_log))
        if self._personal is not None:
            found.extend(
                (name, NEEDS_SIGN_IN) for name in self._personal.names if name not in self._personal.catalog
            )
        return found

    def server_states(self) -> dict[str, bool]:
        """Whether each server is connected now; a per-person server connects per call, so counts as ready."""
        states = {name: link.ready for name, link in self._links.items()}
        if self._personal is not None:
            states.update(dict.fromkeys(self._personal.names, True))
        return states

    def starting(self) -> list[str]:
        """Servers still making their first attempt: their tools are not offered yet."""
        found = [name for name, link in self._links.items() if not link.attempted]
        if self._personal is not None:
            found.extend(name for name, link in self._personal.catalog.items() if not link.attempted)
        return found

    def list_tools(self) -> list[ToolSpec]:
        return list(self._catalog.values())

    def list_prompts(self) -> list[PromptSpec]:
        return list(self._prompts.values())

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        """The text a prompt starts a turn with; raises `PromptError` with a message people can act on."""
        if (spec := self._prompts.get(name)) is None:
            known = ", ".join(sorted(self._prompts)) or "none right now"
            raise PromptError(f"There is no prompt named {name!r}. Prompts: {known}.")
        if missing := [a.name for a in spec.arguments if a.required and not arguments.get(a.name)]:
            raise PromptError(f"The prompt {name} needs: {', '.join(missing)}.")
        if (client := self._links[spec.server].client) is None:
            raise PromptError(f"The server {spec.server} is not running right now; try again shortly.")
        try:
            with anyio.fail_after(self._default_timeout):
                result = await client.get_prompt(spec.original_name, arguments)
        except MCPError as exc:
            raise PromptError(f"{spec.server} could not give the prompt {name}: {exc.error.message}") from exc
        except TimeoutError as exc:
            raise PromptError(f"{spec.server} did not give the prompt {name} in time.") from exc
        text = prompt_text(result)
        if not text.strip():
            raise PromptError(f"The prompt {name} came back empty.")
        return text

    async def complete_prompt_argument(
        self, name: str, argument: str, value: str, known: dict[str, str] | None = None
    ) -> list[str]:
        """Suggestions for one argument of a prompt, where its server completes; [] otherwise."""
        spec = self._prompts.get(name)
        client = self._links[spec.server].client if spec is not None else None
        if spec is None or client is None or client.server_capabilities.completions is None:
            return []
        reference = mcp_types.PromptReference(type="ref/prompt", name=spec.original_name)
        try:
            with anyio.fail_after(min(self._default_timeout, 3.0)):
                result = await client.complete(reference, {"name": argument, "value": value}, known or None)
        except (MCPError, TimeoutError) as exc:
            logger.info("MCP server %r could not complete %s.%s: %s", spec.server, name, argument, exc)
            return []
        return list(result.completion.values)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checking on every change; the caller bounds it."""
        while not predicate():
            await self._change.wait()

    async def wait_until_ready(self) -> None:
        await self.wait_for(lambda: all(link.ready for link in self._links.values()))

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        """Run a tool by its exposed name; a rug pull of the `screened` spec gets a "changed" refusal."""
        spec = self._catalog.get(name) if screened is None else self._still_offered(screened)
        if spec is None:
            return results.unknown_tool(name, self._catalog)
        if isinstance(spec, ToolResult):
            return spec
        started = time.perf_counter()
        link = self._links.get(spec.server)
        if link is None and self._personal is not None:  # a per-person server: the person's own link
            found = await self._personal.link_for(spec, context)
            if isinstance(found, ToolResult):
                return replace(found, latency_ms=(time.perf_counter() - started) * 1000)
            if spec.original_name == CONNECT_TOOL:
                self._changed()
                listed = ", ".join(tool.name for tool in found.tools) or "(none listed yet)"
                return ToolResult(
                    content=f"Connected to {spec.server}. Its tools are now available: {listed}."
                )
            link = found
        assert link is not None
        result = await self._calls.call(link, Call(spec, name, arguments, context, started))
        asked = sign_in_asked(link) if result.is_error else None
        if asked is None:
            return result
        if link.personal:  # the server asked for more than the person granted (step-up): sign in again
            return ToolResult(content="", needs_sign_in=asked[0])
        # A step-up of nerve's own account: only an admin can grant it, and `nerve connect` asks for
        # what was wanted here as well.
        wanted = f" (scope {asked[1]})" if asked[1] else ""
        reason = (
            f"it asks for more access{wanted} than nerve's account has: "
            f"an admin runs `nerve connect {spec.server}` to grant it"
        )
        return results.unavailable(spec.server, reason, latency_ms=result.latency_ms)

    def _still_offered(self, screened: ToolSpec) -> ToolSpec | ToolResult:
        """The live spec a call was screened against, by server and tool, never by the exposed name."""
        key = (screened.server, screened.original_name)
        live = next(
            (spec for spec in self._catalog.values() if (spec.server, spec.original_name) == key), None
        )
        if live is None:
            return results.changed(screened.name, f"{screened.server} no longer offers it")
        if screened.definition_hash and live.definition_hash != screened.definition_hash:
            logger.warning(
                "MCP server %r changed tool %r after a call to it was checked; the call was not made",
                screened.server,
                screened.original_name,
            )
            return results.changed(screened.name, "its server changed its definition after it was checked")
        return live

    async def forget_sign_in(self, server: str, person: str) -> None:
        if self._personal is not None:
            await self._personal.forget(server, person)

    def _changed(self) -> None:
        """A link's state or tools changed: rebuild the catalog and wake anyone waiting."""
        listings = {name: link.tools for name, link in self._links.items() if link.listed}
        if self._personal is not None:
            known = self._personal.known_tools
            known.update({name: link.tools for name, link in self._personal.catalog.items() if link.listed})
            listings.update(known)
        self._catalog, collisions = build_catalog(
            listings, self._servers, default_timeout=self._default_timeout
        )
        self._warn_once(collision.describe("tool") for collision in collisions)
        if self._personal is not None:
            for name in self._personal.names:
                if name not in listings:
                    spec = self._personal.connect_spec(name)
                    self._catalog[spec.name] = spec
        self._prompts, prompt_collisions = prompt_specs(
            {name: link.prompts for name, link in self._links.items() if link.ready}
        )
        self._warn_once(collision.describe("prompt") for collision in prompt_collisions)
        self._warn_once(
            f"servers file: {problem}" for problem in unmatched_overrides(listings, self._servers)
        )
        self._change.set()
        self._change = asyncio.Event()

    def _warn_once(self, problems: Iterable[str]) -> None:
        for problem in problems:
            if problem not in self._warned:
                self._warned.add(problem)
                logger.warning("%s", problem)


def sign_in_asked(link: ServerLink) -> tuple[SignInNeeded, str | None] | None:
    """The sign-in (and scope) a failed call's server asked for mid-call, taken: reported once."""
    from bot.mcp.auth.sign_ins import ParkingOAuth

    provider = link.auth
    if not isinstance(provider, ParkingOAuth) or provider.asked is None:
        return None
    needed, provider.asked = provider.asked, None
    return needed, provider.context.client_metadata.scope

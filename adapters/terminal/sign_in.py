"""Signing in to per-person servers from the terminal chat, and `nerve connections`.

The person is at this machine, so the browser comes back to a loopback server on 127.0.0.1 (RFC
8252), started only when a server signs in with OAuth; Ctrl-C stops waiting, and a sign-in finished
meanwhile lets its turn go on before the next question."""

from __future__ import annotations

import asyncio
import threading
import time
import webbrowser
from dataclasses import KW_ONLY, dataclass, field
from typing import Self

from aiohttp import web
from rich.console import Console

from adapters.common.cards import NO_SIGN_INS, since
from adapters.oauth_http import NOT_A_SIGN_IN, SignInEndpoints, page
from adapters.terminal.keyboard import Interrupted, interruptible
from adapters.terminal.safe import shown
from adapters.terminal.views import conversation_key
from bot.agent import Agent
from bot.config import Settings
from bot.runtime import LOOPBACK_CALLBACK, load_mcp_config, open_store, person_of, sign_ins_for
from bot.types import ConversationKey, Progress, SignedIn, SignInNeeded, TurnEvent

HOST = "127.0.0.1"


class LoopbackCallback:
    """The browser's way back: `http://127.0.0.1:<free port>/callback` (servers ignore its port)."""

    def __init__(self) -> None:
        self._endpoints: SignInEndpoints | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._signed: asyncio.Queue[SignedIn] = asyncio.Queue()

    @property
    def redirect_uri(self) -> str:
        return f"http://{HOST}:{self._port}{LOOPBACK_CALLBACK}"

    def attach(self, agent: Agent) -> None:
        """Finish sign-ins with `agent` from now on (known once the runtime is open)."""
        self._endpoints = SignInEndpoints(
            agent, public_url=None, back_to="the terminal", resume=self._signed.put_nowait
        )

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get(LOOPBACK_CALLBACK, self._callback)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, 0).start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _callback(self, request: web.Request) -> web.Response:
        if self._endpoints is None:
            return page("Not a sign-in", NOT_A_SIGN_IN, status=400)
        return await self._endpoints.callback(request)

    async def wait(self, within: float) -> SignedIn | None:
        """The next finished sign-in (one with turns waiting for it), or None after `within` seconds."""
        try:
            async with asyncio.timeout(within):
                return await self._signed.get()
        except TimeoutError:
            return None

    def finished(self) -> list[SignedIn]:
        """Sign-ins finished while nobody waited for them."""
        return [self._signed.get_nowait() for _ in range(self._signed.qsize())]


def open_in_browser(url: str) -> None:
    """Open `url` in a thread of its own: a console browser holds its caller until it is closed."""
    threading.Thread(target=webbrowser.open, args=(url,), name="nerve-browser", daemon=True).start()


@dataclass(eq=False)
class TerminalSignIn:
    """Sign-ins of one chat: the links its turns ask for, waiting for the browser, the commands."""

    agent: Agent
    callback: LoopbackCallback | None
    console: Console
    key: ConversationKey
    user: str
    _: KW_ONLY
    wait: float
    # The sign-ins the last turn asked for, shown once it has parked.
    needed: list[SignInNeeded] = field(default_factory=list)

    def watch(self, forward: Progress) -> Progress:
        """A turn's progress, keeping the sign-ins it asks for (shown once the turn has parked)."""

        async def progress(event: TurnEvent) -> None:
            if event.kind == "ask" and event.ask is not None and event.ask.sign_in is not None:
                self.needed.append(event.ask.sign_in)
            else:
                await forward(event)

        return progress

    async def signed_in(self) -> list[str]:
        """Show and open the links the last turn asked for, and wait: the parked turns free to go on."""

        needed, self.needed = self.needed, []
        callback = self.callback
        if callback is None:
            for sign_in in needed:
                self.console.print(
                    f"[yellow]{shown(sign_in.server)} needs a sign-in this chat cannot take.[/yellow]"
                )
            return []
        servers = {sign_in.server for sign_in in needed}
        request_ids: list[str] = []

        async def shown_and_waited() -> None:
            # Shown once Ctrl-C stops the waiting: a person may press it as soon as they see a link.
            minutes = max(1, round(self.wait / 60))
            for sign_in in needed:
                self.console.print(
                    f"[bold]{shown(sign_in.server)}[/bold] works with your own account. Sign in in your"
                    f" browser (the link is yours only and expires in {minutes} min):"
                )
                # The link whole on a line of its own, so a terminal can open it and a person can copy it.
                self.console.print(shown(sign_in.url), soft_wrap=True, highlight=False)
                open_in_browser(sign_in.url)
            deadline = time.monotonic() + self.wait
            while servers and (signed := await callback.wait(deadline - time.monotonic())) is not None:
                self.console.print(f"[green]Connected to {shown(signed.server)}.[/green]")
                servers.discard(signed.server)
                request_ids.extend(signed.request_ids)

        try:
            await interruptible(shown_and_waited())
        except Interrupted:
            self.console.print(
                "[dim]Stopped waiting. Sign in with the link above whenever you like: the question goes on"
                " then, before your next one.[/dim]"
            )
            return []
        if servers:
            names = ", ".join(sorted(servers))
            self.console.print(
                f"[yellow]Not signed in to {shown(names)} in time:[/yellow] /connect NAME for a new link;"
                " a question that waits for it goes on once you have signed in."
            )
        return list(dict.fromkeys(request_ids))

    def meanwhile(self) -> list[str]:
        """Parked turns whose sign-in finished while the chat was not waiting for it."""
        found = self.callback.finished() if self.callback is not None else []
        for signed in found:
            self.console.print(f"[green]Connected to {shown(signed.server)}.[/green]")
        return list(dict.fromkeys(rid for signed in found for rid in signed.request_ids))

    # --- the chat's commands -----------------------------------------------------------------------

    async def command(self, command: str, argument: str) -> list[str]:
        """`/connections`, `/connect NAME`, `/disconnect NAME`; the parked turns a sign-in here lets go on."""
        servers = self.agent.sign_in_servers()
        if not servers:
            self.console.print(NO_SIGN_INS)
            return []
        server = argument.strip()
        if command == "/connections":
            mine = await self.agent.connected(self.key, self.user)
            print_connection_lines(self.console, [(c.server, c.since) for c in mine], servers)
        elif not server:
            names = ", ".join(servers)
            self.console.print(f"Name the server: {shown(command)} NAME, one of {shown(names)}.")
        elif command == "/disconnect":
            said = f"Disconnected from {shown(server)}: nerve no longer uses your account there."
            if not await self.agent.disconnect(self.key, self.user, server):
                said = f"You were not connected to {shown(server)}."
            self.console.print(said)
        else:
            return await self.connect([server])
        return []

    async def connect(self, servers: list[str]) -> list[str]:
        """Start a sign-in to each of `servers` and wait for the browser, as a turn's would."""
        for server in servers:
            started = await self.agent.connect(self.key, self.user, server)
            if started.sign_in is None:
                self.console.print(shown(started.note))
            else:
                self.needed.append(started.sign_in)
        return await self.signed_in() if self.needed else []


def print_connection_lines(console: Console, connected: list[tuple[str, float]], servers: list[str]) -> None:
    lines = [f"{server} — connected {since(stamp)}" for server, stamp in connected if server in servers]
    if not lines:
        lines.append("No connections: you have not signed in to any server with your own account.")
    others = [name for name in servers if name not in {server for server, _ in connected}]
    if others:
        lines.append(f"Not connected: {', '.join(others)} (/connect NAME in the chat)")
    for line in lines:
        console.print(shown(line))


async def print_connections(settings: Settings, console: Console | None = None) -> int:
    """`nerve connections`: the local person's connections, without starting any server (and
    without a servers file, from the store alone: names and times are stored in the clear)."""
    console = console or Console(highlight=False)
    configured = None
    if settings.nerve_mcp_config.is_file():
        configured = load_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms).servers
    key = conversation_key("default")
    person = person_of(key, key.workspace, settings.platforms)
    async with open_store(settings) as store:
        if configured is None:
            connected = [(row.server, row.updated_at) for row in await store.connections_of(person)]
            servers = [server for server, _ in connected]
        else:
            # The redirect is never used here: listing reads the store only.
            sign_ins = sign_ins_for(settings, configured, store, f"http://{HOST}{LOOPBACK_CALLBACK}")
            servers = sign_ins.per_person_servers() if sign_ins is not None else []
            if sign_ins is None or not servers:
                console.print(NO_SIGN_INS)
                return 0
            connected = [(c.server, c.since) for c in await sign_ins.connections(person)]
    print_connection_lines(console, connected, servers)
    return 0

"""Servers whose calls carry each person's own sign-in: one link per person, opened on demand.

Before anyone has connected, the model is offered `connect_<server>`, whose call parks the turn
until the person has signed in; the server's own tools appear in the next round."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.mcp import results
from bot.mcp.address_guard import Refused
from bot.mcp.catalog import ListedTool
from bot.mcp.link import ServerLink
from bot.mcp.server_config import ServerConfig
from bot.types import CallContext, ToolResult, ToolSpec

if TYPE_CHECKING:  # the host names this module's constants; the OAuth client loads with a sign-in
    from bot.mcp.auth.sign_ins import SignIns

logger = logging.getLogger(__name__)

CONNECT_PREFIX = "connect_"
CONNECT_TOOL = "__connect__"
# People's links kept open at once; the least recently used is closed beyond this.
MAX_OPEN_LINKS = 200
NEEDS_SIGN_IN = "needs sign-in: nobody has connected an account yet"

MakeLink = Callable[..., ServerLink]


class PersonalServers:
    """The per-person servers of one host: their links by (server, person), and the catalog links."""

    def __init__(self, servers: dict[str, ServerConfig], sign_ins: SignIns, make_link: MakeLink) -> None:
        self._servers = servers
        self.sign_ins = sign_ins
        self._make_link = make_link
        self._links: OrderedDict[tuple[str, str], tuple[ServerLink, asyncio.Task[None]]] = OrderedDict()
        self.catalog: dict[str, ServerLink] = {}
        # The last list each server gave; kept when its catalog link closes (that person disconnected).
        self.known_tools: dict[str, tuple[ListedTool, ...]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def names(self) -> list[str]:
        return list(self._servers)

    async def start(self) -> None:
        """Open each server's catalog link as the person who signed in most recently, if anyone."""
        for server in self._servers:
            if people := await self.sign_ins.people_connected(server):
                self.catalog[server] = self._open(server, people[0])

    def connect_spec(self, server: str) -> ToolSpec:
        return ToolSpec(
            name=f"{CONNECT_PREFIX}{server}",
            description=(
                f"The {server} service acts with each person's own account, and nobody has connected"
                f" one yet, so its tools are not available. Call this when the person asks for"
                f" something {server} does: they get a private sign-in button, and once they have"
                f" signed in, {server}'s tools become available."
            ),
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            server=server,
            original_name=CONNECT_TOOL,
            approval="never",
        )

    async def link_for(self, spec: ToolSpec, context: CallContext | None) -> ServerLink | ToolResult:
        """The person's own link to the call's server, or why the call cannot be made yet."""
        if not (person := context.person if context is not None else ""):
            return results.unavailable(spec.server, "it needs a signed-in person, and this call has none")
        if not await self.sign_ins.has_tokens(spec.server, person):
            return await self._sign_in(spec.server, person)
        await self._drop_if_stale(spec.server, person)
        link = self._open(spec.server, person)
        await link.wait_ready(within=spec.timeout)
        if (needed := link.sign_in) is not None:
            await self.forget(spec.server, person)
            return ToolResult(content="", needs_sign_in=needed)
        self.catalog.setdefault(spec.server, link)
        return link

    async def _drop_if_stale(self, server: str, person: str) -> None:
        """Close a link whose tokens were replaced by a newer sign-in (a step-up, another process)."""
        from bot.mcp.auth.sign_ins import ParkingOAuth

        found = self._links.get((server, person))
        if found is None or not isinstance(found[0].auth, ParkingOAuth):
            return
        stored = await self.sign_ins.ledger.stored_tokens(server, person)
        if stored is not None and stored.updated_at > found[0].auth.tokens.stored_at:
            await self.forget(server, person)

    async def _sign_in(self, server: str, person: str) -> ToolResult:
        try:
            needed = await self.sign_ins.begin(server, person)
        except Refused as exc:  # inside the network, or plain http: say which and what to set
            return results.unavailable(server, str(exc))
        except Exception as exc:  # discovery or registration failed: the server is not usable now
            logger.warning("could not start a sign-in to %r: %s", server, exc)
            return results.unavailable(server, f"its sign-in could not be started ({type(exc).__name__})")
        return ToolResult(content="", needs_sign_in=needed)

    def _open(self, server: str, person: str) -> ServerLink:
        if (found := self._links.get((server, person))) is not None:
            self._links.move_to_end((server, person))
            return found[0]
        provider = self.sign_ins.provider(server, person)
        link = self._make_link(server, self._servers[server], auth=provider, personal=True)
        task = asyncio.create_task(link.run(), name=f"mcp-server:{server}:{person}")
        self._links[(server, person)] = (link, task)
        while len(self._links) > MAX_OPEN_LINKS:
            oldest, (old_link, _) = next(iter(self._links.items()))
            if self.catalog.get(oldest[0]) is not old_link:  # a catalog link stays open
                closing = asyncio.create_task(self.forget(*oldest))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
                break
            self._links.move_to_end(oldest)
        return link

    async def forget(self, server: str, person: str) -> None:
        """Close the person's link (after Disconnect, a stale sign-in): their next call asks again."""
        if (found := self._links.pop((server, person), None)) is None:
            return
        link, task = found
        if self.catalog.get(server) is link:
            del self.catalog[server]
        link.stop()
        await asyncio.wait([task], timeout=10)

    async def aclose(self) -> None:
        for server, person in list(self._links):
            await self.forget(server, person)

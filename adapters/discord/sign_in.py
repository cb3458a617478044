"""Signing in to per-person servers from Discord: the private Connect button, /connections, /connect.

A sign-in link is bound to one person, so only they may see it: an ephemeral follow-up sent once the
answer replaced the deferred response (Discord makes the *first* follow-up that public response),
or else a DM, never replaced by a post others could see.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from adapters.common.cards import CONNECTED, NO_SIGN_INS, disconnected, not_started, sign_in_note, since
from adapters.common.cards import SIGN_IN_FAILED as FAILED
from adapters.common.tasks import Spawn
from adapters.discord.commands import asked_here, choices, slash
from adapters.discord.delivery import NO_MENTIONS, ClickButton, landed, tell, view_of
from bot.agent import Connections
from bot.text import truncate
from bot.types import Progress, SignInNeeded, TurnEvent

if TYPE_CHECKING:  # the OAuth client is loaded only where a server signs in
    from bot.agent import Connection

logger = logging.getLogger(__name__)

DISCONNECT_TEMPLATE = r"nerve:dc:(?P<server>[^\s]{1,90})"
LISTED = 20  # a message holds at most 5 rows of 5 buttons; one button per row keeps names readable


def link_message(needed: SignInNeeded, expires_in: float) -> tuple[str, discord.ui.View]:
    """The note and a link button to the sign-in page (a link button: Discord sends us no click)."""
    label = truncate(f"Connect {needed.server}", 80)[0]
    view = view_of(discord.ui.Button(style=discord.ButtonStyle.link, label=label, url=needed.url))
    return sign_in_note(f"**{needed.server}**", expires_in), view


class DisconnectButton(ClickButton, template=DISCONNECT_TEMPLATE):
    """Disconnect one server (the click's server); its click goes to the client's `SignInLinks`."""

    route, prefix = "sign_in_links", "nerve:dc:"


def connections_message(
    connected: list[Connection], servers: list[str]
) -> tuple[str, discord.ui.View | None]:
    """`/connections`: the person's connections with a Disconnect button each, and what else there is."""
    mine = [c for c in connected if c.server in servers][:LISTED]
    if mine:
        lines = [f"**{CONNECTED}**", *(f"• **{c.server}** — {since(c.since)}" for c in mine)]
    else:
        lines = ["You have not connected any service with your own account."]
    others = [name for name in servers if name not in {c.server for c in mine}]
    if others:
        lines.append("Not connected: " + ", ".join(f"`{name}`" for name in others) + " — `/connect server:`")
    usable = [c for c in mine if len(c.server) <= 90 and not any(ch.isspace() for ch in c.server)]
    danger = discord.ButtonStyle.danger
    buttons = [DisconnectButton(c.server, label=f"Disconnect {c.server}", style=danger) for c in usable[:25]]
    return truncate("\n".join(lines), 2000)[0], view_of(*buttons) if buttons else None


@dataclass(eq=False)
class TurnLinks:
    """The sign-in links one turn asks for: after its answer, or by DM without an interaction."""

    _links: SignInLinks
    _interaction: discord.Interaction[Any] | None = None
    _pending: list[SignInNeeded] = field(default_factory=list)

    def watch(self, forward: Progress) -> Progress:
        async def progress(event: TurnEvent) -> None:
            needed = event.ask.sign_in if event.kind == "ask" and event.ask is not None else None
            if needed is not None:
                if self._interaction is None:
                    self._links.send_dm(needed)
                else:
                    self._pending.append(needed)
            await forward(event)

        return progress

    async def flush(self) -> None:
        """After the turn's answer replaced the deferred response: the links, ephemeral."""
        pending, self._pending = self._pending, []
        for needed in pending:
            await self._links.follow_up(self._interaction, needed)


@dataclass(eq=False)
class SignInLinks:
    """Sign-in links, /connections and Disconnect clicks for one Discord client."""

    client: discord.Client
    connections: Connections | None
    spawn: Spawn
    _: KW_ONLY
    expires_in: float

    async def follow_up(self, interaction: discord.Interaction[Any] | None, needed: SignInNeeded) -> None:
        """The link as an ephemeral follow-up while `interaction` can send one, else by DM."""
        if interaction is not None and not interaction.is_expired():
            sent = tell(interaction, *link_message(needed, self.expires_in))
            if await landed(sent, "no ephemeral sign-in link; sending a DM instead", level=logging.INFO):
                return
        self.send_dm(needed)

    def send_dm(self, needed: SignInNeeded) -> None:
        self.spawn(self._dm(needed), f"discord-sign-in-{needed.server}")

    async def _dm(self, needed: SignInNeeded) -> None:
        # The Discord user id ends the person id (`discord:42` → 42).
        tail = needed.person.rsplit(":", 1)[-1]
        if not tail.isdigit():
            logger.warning("no Discord user in %r: its sign-in link is not sent", needed.person)
            return
        user_id = int(tail)

        async def send() -> None:
            channel = await self.client.create_dm(discord.Object(id=user_id))
            text, view = link_message(needed, self.expires_in)
            await channel.send(text, view=view, allowed_mentions=NO_MENTIONS)

        # Never in the channel instead: the link would let anyone sign in as this person.
        failed = "could not DM %s their sign-in link for %s (their DMs may be closed)"
        await landed(send(), failed, user_id, needed.server)

    # --- commands and clicks ---------------------------------------------------------------------

    async def offered(self, interaction: discord.Interaction[Any]) -> Connections | None:
        """The connections, the command deferred ephemeral (so follow-ups stay private); None if none."""
        connections = self.connections
        if connections is None or not connections.servers:
            await tell(interaction, NO_SIGN_INS)
            return None
        await interaction.response.defer(ephemeral=True, thinking=True)
        return connections

    async def clicked(self, interaction: discord.Interaction[Any], server: str) -> None:
        """A Disconnect click: revoke and forget, told to the clicker alone."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        if self.connections is None:
            await tell(interaction, NO_SIGN_INS)
            return
        here = asked_here(interaction)
        try:
            gone = await self.connections.disconnect(here.key, here.user_id, server)
        except Exception:
            logger.exception("disconnecting %s from %s failed", here.user_id, server)
            await tell(interaction, FAILED)
            return
        await tell(interaction, disconnected(server, gone))


def register(tree: app_commands.CommandTree[Any], links: SignInLinks) -> None:
    """Add /connections and /connect to the bot's tree (synced with the others in `setup_hook`)."""

    @slash(tree, "connections")
    async def connections(interaction: discord.Interaction[Any]) -> None:
        if (offered := await links.offered(interaction)) is not None:
            here = asked_here(interaction)
            mine = await offered.of(here.key, here.user_id)
            await tell(interaction, *connections_message(mine, offered.servers))

    @slash(tree, "connect")
    async def connect(interaction: discord.Interaction[Any], server: str) -> None:
        if (offered := await links.offered(interaction)) is None:
            return
        here = asked_here(interaction)
        try:
            started = await offered.connect(here.key, here.user_id, server.strip())
        except Exception as exc:
            logger.warning("could not start a sign-in to %r: %s", server, exc)
            await tell(interaction, not_started(server, exc))
            return
        if started.sign_in is None:
            await tell(interaction, started.note)
        else:
            await links.follow_up(interaction, started.sign_in)

    @connect.autocomplete("server")
    async def server_names(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        return choices(links.connections.servers if links.connections is not None else [], current)

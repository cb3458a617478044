"""Signing in to per-person servers from Discord: the private Connect button, /connections, /connect.

A sign-in link is bound to one person, so only that person may see it:

* a turn started by a slash command (`/ask`, `/prompt`) has an interaction, and the link comes as an
  ephemeral follow-up of it. It is sent once the turn's answer has replaced the deferred "thinking"
  response: Discord turns the *first* follow-up after a deferral into that (public) response, so a
  link sent earlier would show in the channel;
* a mention, a message in a thread or a DM is not an interaction, and Discord offers nothing
  ephemeral without one: the link goes to the person in a DM (so does one asked for by a turn that
  goes on later, after a click or a sign-in). A DM the person does not accept is logged, never
  replaced by a post others could see.

The person's browser comes back to nerve's callback (`adapters.oauth_http`); the parked turn then
goes on in its conversation (`resume_later`). `/connections` lists the person's own connections
with a Disconnect button each (the button keeps working after a restart: its custom_id names the
server); `/connect server:` starts one. Both answer only to the person who used them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

import discord
from discord import app_commands

from adapters.common.cards import CONNECTED, NO_SIGN_INS, sign_in_note, since
from adapters.common.cards import SIGN_IN_FAILED as FAILED
from adapters.common.tasks import Spawn
from adapters.discord.commands import asked_here, slash
from adapters.discord.delivery import NO_MENTIONS
from bot.agent import Connection, Connections
from bot.text import truncate
from bot.types import Progress, SignedIn, SignInNeeded, TurnEvent

logger = logging.getLogger(__name__)

DISCONNECT_TEMPLATE = r"nerve:dc:(?P<server>[^\s]{1,90})"
LISTED = 20  # a message holds at most 5 rows of 5 buttons; one button per row keeps names readable


def user_of(person: str) -> int | None:
    """The Discord user id in a person id (`discord:42` → 42)."""
    tail = person.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def link_text(needed: SignInNeeded, expires_in: float) -> str:
    return sign_in_note(f"**{needed.server}**", expires_in)


def link_view(needed: SignInNeeded) -> discord.ui.View:
    """One link button: it opens the sign-in page in the browser (Discord sends us no click)."""
    view = discord.ui.View(timeout=None)
    view.add_item(
        discord.ui.Button(
            style=discord.ButtonStyle.link, label=truncate(f"Connect {needed.server}", 80)[0], url=needed.url
        )
    )
    return view


@runtime_checkable
class DisconnectClicks(Protocol):
    async def disconnect_clicked(self, interaction: discord.Interaction[Any], server: str) -> None: ...


class DisconnectButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=DISCONNECT_TEMPLATE):
    """Disconnect one server; the click goes to the client's `disconnect_clicked`."""

    def __init__(self, server: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=truncate(f"Disconnect {server}", 80)[0],
                style=discord.ButtonStyle.danger,
                custom_id=f"nerve:dc:{server}",
            )
        )
        self.server = server

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> DisconnectButton:
        return cls(match["server"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        client = interaction.client
        if isinstance(client, DisconnectClicks):
            await client.disconnect_clicked(interaction, self.server)
        else:
            await interaction.response.defer()


def connections_message(
    connected: list[Connection], servers: list[str]
) -> tuple[str, discord.ui.View | None]:
    """`/connections`: the person's connections with a Disconnect button each, and what else there is."""
    mine = [c for c in connected if c.server in servers][:LISTED]
    lines = []
    if mine:
        lines.append(f"**{CONNECTED}**")
        lines.extend(f"• **{c.server}** — {since(c.since)}" for c in mine)
    else:
        lines.append("You have not connected any service with your own account.")
    others = [name for name in servers if name not in {c.server for c in mine}]
    if others:
        lines.append("Not connected: " + ", ".join(f"`{name}`" for name in others) + " — `/connect server:`")
    view: discord.ui.View | None = None
    usable = [c for c in mine if len(c.server) <= 90 and not any(ch.isspace() for ch in c.server)]
    if usable:
        view = discord.ui.View(timeout=None)
        for connection in usable[:25]:
            view.add_item(DisconnectButton(connection.server))
    return truncate("\n".join(lines), 2000)[0], view


class TurnLinks:
    """The sign-in links one turn asks for: an interaction's come after its answer, the rest by DM."""

    def __init__(self, links: SignInLinks, interaction: discord.Interaction[Any] | None) -> None:
        self._links = links
        self._interaction = interaction
        self._pending: list[SignInNeeded] = []

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
            if not await self._links.follow_up(self._interaction, needed):
                self._links.send_dm(needed)


@dataclass(eq=False)
class SignInLinks:
    """Sign-in links, /connections and Disconnect clicks for one Discord client."""

    client: discord.Client
    connections: Connections | None
    spawn: Spawn
    _: KW_ONLY
    expires_in: float

    def for_turn(self, interaction: discord.Interaction[Any] | None = None) -> TurnLinks:
        return TurnLinks(self, interaction)

    def watch(self, forward: Progress) -> Progress:
        """For a turn without an interaction (a mention, a DM, a turn that goes on later)."""
        return TurnLinks(self, None).watch(forward)

    async def follow_up(self, interaction: discord.Interaction[Any] | None, needed: SignInNeeded) -> bool:
        if interaction is None or interaction.is_expired():
            return False
        try:
            await interaction.followup.send(
                link_text(needed, self.expires_in),
                view=link_view(needed),
                ephemeral=True,
                allowed_mentions=NO_MENTIONS,
            )
        except discord.HTTPException as exc:
            logger.info("no ephemeral sign-in link (%s %s); sending a DM instead", exc.status, exc.text)
            return False
        return True

    def send_dm(self, needed: SignInNeeded) -> None:
        self.spawn(self._dm(needed), f"discord-sign-in-{needed.server}")

    async def _dm(self, needed: SignInNeeded) -> None:
        user_id = user_of(needed.person)
        if user_id is None:
            logger.warning("no Discord user in %r: its sign-in link is not sent", needed.person)
            return
        try:
            channel = await self.client.create_dm(discord.Object(id=user_id))
            await channel.send(
                link_text(needed, self.expires_in), view=link_view(needed), allowed_mentions=NO_MENTIONS
            )
        except discord.HTTPException as exc:
            # Never in the channel instead: the link would let anyone sign in as this person.
            logger.warning(
                "could not DM %s their sign-in link for %s: %s %s (their DMs may be closed)",
                user_id,
                needed.server,
                exc.status,
                exc.text,
            )

    # --- commands and clicks ---------------------------------------------------------------------

    async def list_command(self, interaction: discord.Interaction[Any]) -> None:
        connections = self.connections
        if connections is None or not connections.servers:
            await interaction.response.send_message(NO_SIGN_INS, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        here = asked_here(interaction)
        text, view = connections_message(await connections.of(here.key, here.user_id), connections.servers)
        extra: dict[str, Any] = {"view": view} if view is not None else {}
        await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_MENTIONS, **extra)

    async def connect_command(self, interaction: discord.Interaction[Any], server: str) -> None:
        connections = self.connections
        if connections is None or not connections.servers:
            await interaction.response.send_message(NO_SIGN_INS, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        # Ephemeral from the start: the first follow-up takes this response's place, seen by them alone.
        await interaction.response.defer(ephemeral=True, thinking=True)
        here = asked_here(interaction)
        try:
            started = await connections.connect(here.key, here.user_id, server.strip())
        except Exception as exc:
            logger.warning("could not start a sign-in to %r: %s", server, exc)
            text = f"I could not start the sign-in to {server} ({type(exc).__name__}); try again later."
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        if started.sign_in is None:
            await interaction.followup.send(started.note, ephemeral=True, allowed_mentions=NO_MENTIONS)
        elif not await self.follow_up(interaction, started.sign_in):
            self.send_dm(started.sign_in)

    async def disconnect(self, interaction: discord.Interaction[Any], server: str) -> None:
        """A Disconnect click: revoke and forget, told to the clicker alone."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        if self.connections is None:
            await interaction.followup.send(NO_SIGN_INS, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        here = asked_here(interaction)
        try:
            gone = await self.connections.disconnect(here.key, here.user_id, server)
        except Exception:
            logger.exception("disconnecting %s from %s failed", here.user_id, server)
            await interaction.followup.send(FAILED, ephemeral=True, allowed_mentions=NO_MENTIONS)
            return
        text = (
            f"Disconnected from {server}: I no longer use your account there. Ask again to reconnect."
            if gone
            else f"You were not connected to {server}."
        )
        await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_MENTIONS)

    def server_choices(self, current: str) -> list[app_commands.Choice[str]]:
        servers = self.connections.servers if self.connections is not None else []
        found = [name for name in servers if current.lower() in name.lower() and len(name) <= 100]
        return [app_commands.Choice(name=name, value=name) for name in found[:25]]


class SignInHost(Protocol):
    @property
    def tree(self) -> app_commands.CommandTree[Any]: ...

    @property
    def sign_in_links(self) -> SignInLinks: ...


def register(bot: SignInHost) -> None:
    """Add /connections and /connect to the bot's tree (synced with the others in `setup_hook`)."""
    tree = bot.tree

    @slash(tree, "connections")
    async def connections(interaction: discord.Interaction[Any]) -> None:
        await bot.sign_in_links.list_command(interaction)

    @slash(tree, "connect")
    async def connect(interaction: discord.Interaction[Any], server: str) -> None:
        await bot.sign_in_links.connect_command(interaction, server)

    @connect.autocomplete("server")
    async def server_names(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        return bot.sign_in_links.server_choices(current)


def resume_signed_in(resume_later: Callable[[str], None]) -> Callable[[SignedIn], None]:
    """What the callback calls once a person signed in: each waiting turn goes on in the background."""

    def resume(signed: SignedIn) -> None:
        for request_id in signed.request_ids:
            resume_later(request_id)

    return resume

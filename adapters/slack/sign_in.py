"""Signing in to per-person servers from Slack: the private Connect button, and `/nerve connections`.

A sign-in link is bound to one person, so it is only ever shown to them (`chat.postEphemeral`),
never in a message the channel sees; a second use is refused by the callback page.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters.common.cards import CONNECTED, NO_SIGN_INS, disconnected, not_started, sign_in_note, since
from adapters.common.cards import SIGN_IN_FAILED as FAILED
from adapters.common.tasks import Spawn
from adapters.slack.clicks import click_of, payload_field
from adapters.slack.events import Turn, person_key, typed_in
from adapters.slack.post import Poster
from adapters.slack.render import context, escape, section
from bot.agent import Connections
from bot.types import ConversationKey, Progress, SignInNeeded, TurnEvent

if TYPE_CHECKING:  # the OAuth client is loaded only where a server signs in
    from bot.agent import Connection

logger = logging.getLogger(__name__)


# The Connect button opens the link in the browser; Slack still sends its click, which is acked only.
CONNECT_ACTION = "nerve_connect"
CONNECT_ACTIONS = re.compile(r"^nerve_connect(\..*)?$")
DISCONNECT_ACTION = "nerve_disconnect"
LISTED = 40
CONNECT_USAGE = "Usage: `/nerve connect NAME` — one of: {names}."


def link_message(needed: SignInNeeded, expires_in: float) -> tuple[str, list[dict[str, Any]]]:
    """The private note with the Connect button: (fallback text, blocks)."""
    text = sign_in_note(f"*{escape(needed.server)}*", expires_in)
    blocks: list[dict[str, Any]] = [
        section(text),
        {
            "type": "actions",
            "block_id": "nerve_connect",
            "elements": [
                {
                    "type": "button",
                    "action_id": f"{CONNECT_ACTION}.{needed.server}"[:255],
                    "text": {"type": "plain_text", "text": f"Connect {needed.server}"[:75]},
                    "url": needed.url,
                    "style": "primary",
                }
            ],
        },
    ]
    return f"Connect {needed.server} to go on: {needed.url}", blocks


def connections_message(connected: list[Connection], servers: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """`/nerve connections` where there are `servers`: the person's connections, a Disconnect button each."""
    blocks: list[dict[str, Any]] = []
    mine = [c for c in connected if c.server in servers][:LISTED]
    if mine:
        blocks.append(section(f"*{CONNECTED}*"))
    for connection in mine:
        server = escape(connection.server)
        blocks.append(
            {
                **section(f"• *{server}* — {since(connection.since)}"),
                "accessory": {
                    "type": "button",
                    "action_id": DISCONNECT_ACTION,
                    "text": {"type": "plain_text", "text": "Disconnect"},
                    "value": connection.server[:2000],
                    "style": "danger",
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Disconnect?"},
                        "text": {
                            "type": "mrkdwn",
                            "text": f"I will stop using your *{server}* account; you can connect it again.",
                        },
                        "confirm": {"type": "plain_text", "text": "Disconnect"},
                        "deny": {"type": "plain_text", "text": "Keep"},
                    },
                },
            }
        )
    others = [name for name in servers if name not in {c.server for c in mine}]
    if others:
        names = ", ".join(f"`{escape(name)}`" for name in others[:LISTED])
        blocks.append(context(f"Not connected: {names} — `/nerve connect NAME`"))
    listed = ", ".join(c.server for c in mine) or "none"
    return f"Your connections: {listed}", blocks


@dataclass(eq=False)
class SlackSignIns:
    """Sign-in links, `/nerve connections` and Disconnect clicks for one Slack bot."""

    connections: Connections | None
    poster: Poster
    spawn: Spawn
    _: KW_ONLY
    expires_in: float

    # --- during a turn ------------------------------------------------------------------------

    def watch(self, turn: Turn, forward: Progress) -> Progress:
        """The turn's progress, each sign-in link shown to its person alone in the background."""

        async def progress(event: TurnEvent) -> None:
            if event.kind == "ask" and event.ask is not None and event.ask.sign_in is not None:
                self.spawn(self.show_link(turn.channel, turn.reply_thread_ts, event.ask.sign_in))
            await forward(event)

        return progress

    async def show_link(self, channel: str, thread: str | None, needed: SignInNeeded) -> None:
        # Only ever to its person: never anywhere public instead, where anyone could sign in as them.
        text, blocks = link_message(needed, self.expires_in)
        # The Slack user id ends the person id (`slack:T123:U456` → `U456`).
        await self.poster.tell(channel, needed.person.rsplit(":", 1)[-1], text, thread, blocks)

    # --- /nerve connections, connect -------------------------------------------------------------

    async def on_command(self, ack: AsyncAck, command: Mapping[str, Any], words: list[str]) -> None:
        sub = words[0].lower() if words else "connections"
        here = typed_in(command)
        key, user, channel = here.key, here.user_id, here.key.channel
        connections = self.connections
        if connections is None or not connections.servers:
            await ack(text=NO_SIGN_INS, response_type="ephemeral")
            return
        if sub == "connect":
            if len(words) != 2:
                names = ", ".join(f"`{escape(n)}`" for n in connections.servers)
                await ack(text=CONNECT_USAGE.format(names=names), response_type="ephemeral")
                return
            # Discovery and registration may take longer than Slack waits for the ack.
            await ack()
            self.spawn(self._connect(key, user, channel, words[1]))
            return
        if sub == "disconnect" and len(words) == 2:
            await ack()
            self.spawn(self._disconnect(key, user, channel, None, words[1]))
            return
        try:
            text, blocks = connections_message(await connections.of(key, user), connections.servers)
        except Exception:
            logger.exception("listing the connections of %s failed", user)
            await ack(text=FAILED, response_type="ephemeral")
            return
        await ack(text=text, blocks=blocks, response_type="ephemeral")

    async def _connect(self, key: ConversationKey, user: str, channel: str, server: str) -> None:
        assert self.connections is not None
        try:
            started = await self.connections.connect(key, user, server)
        except Exception as exc:
            logger.warning("could not start a sign-in to %r for %s: %s", server, user, exc)
            await self.poster.tell(channel, user, not_started(server, exc))
            return
        if started.sign_in is None:
            await self.poster.tell(channel, user, started.note)
            return
        await self.show_link(channel, None, started.sign_in)

    # --- Disconnect ------------------------------------------------------------------------------

    async def on_disconnect_click(self, body: Mapping[str, Any]) -> None:
        """A Disconnect button in the person's own connections list (already acked)."""
        pressed = click_of(body)
        server = str(pressed.action.get("value") or "")
        workspace = payload_field(body, "team", "id") or payload_field(body, "user", "team_id") or ""
        if pressed.user is None or not server:
            return
        key = person_key(workspace, pressed.channel or "")
        await self._disconnect(key, pressed.user, pressed.channel, pressed.thread, server)

    async def _disconnect(
        self, key: ConversationKey, user: str, channel: str | None, thread: str | None, server: str
    ) -> None:
        if self.connections is None:
            return
        try:
            gone = await self.connections.disconnect(key, user, server)
        except Exception:
            logger.exception("disconnecting %s from %s failed", user, server)
            await self.poster.tell(channel, user, FAILED, thread)
            return
        await self.poster.tell(channel, user, disconnected(server, gone), thread)

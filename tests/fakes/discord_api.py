"""A local fake of Discord: the REST API and the gateway websocket, on 127.0.0.1.

The real discord.py client talks to it (tests point `discord.http.Route.BASE` and
`discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY` here through the bot's settings), so the
library's own request encoding, rate-limit handling, interaction and webhook code all run. The fake
records every REST request (method, path, query, JSON body, multipart parts) so a test can assert
what Discord *received*, and it can inject 429s and errors on chosen routes. It is the CDN too: the
files people attach (`attachment`) and the bot uploads are served at their `url`, each download
recorded in `downloads`, so discord.py's `Attachment.read()` runs as it does against Discord.

Shapes follow Discord's v10 payloads closely enough for discord.py 2.7; the details that library
insists on are marked where they matter (exact `application/json`, `Via` on 429s, member `flags`,
`attachment_size_limit` on interactions, a body on interaction callbacks).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

from adapters.discord.app import NerveDiscordBot, new_bot
from adapters.settings import Settings

DISCORD_EPOCH_MS = 1420070400000
MESSAGE_CONTENT_INTENT = 1 << 15
API_PREFIX = "/api/v10"


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a multipart request (a file, or `payload_json`)."""

    name: str
    filename: str | None
    content_type: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Recorded:
    """One REST request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    json: Any
    parts: tuple[Part, ...]
    at: float
    status: int

    def body(self) -> Any:
        """The JSON body, whether it came plain or as multipart `payload_json`."""
        if self.json is not None:
            return self.json
        for part in self.parts:
            if part.name == "payload_json":
                return json.loads(part.data)
        return None


@dataclass(slots=True)
class _Injected:
    method: str
    pattern: re.Pattern[str]
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    times: int


@dataclass(slots=True)
class FakeUser:
    id: int
    username: str
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "username": self.username,
            "global_name": self.username,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
        }


@dataclass(slots=True)
class _Gateway:
    ws: web.WebSocketResponse
    seq: int = 0
    ready: bool = False
    # [shard id, shard count] from the IDENTIFY; [0, 1] for an unsharded client.
    shard: tuple[int, int] = (0, 1)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _serves(gw: _Gateway, guild_id: int | None) -> bool:
    """Whether Discord sends this guild's events on the shard (a DM's go to shard 0)."""
    shard_id, count = gw.shard
    return shard_id == ((guild_id >> 22) % count if guild_id is not None else 0)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py only parses a body whose Content-Type is exactly `application/json`.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


class FakeDiscord:
    """Discord's REST API and gateway, scripted by the test."""

    def __init__(self, *, token: str = "fake-token", guild_name: str = "nerve-test") -> None:
        self.token = token
        self._ids = itertools.count(1)
        self._last_id = 0
        self.app_id = self.snowflake()
        self.bot = FakeUser(self.snowflake(), "nerve", bot=True)
        self.owner = FakeUser(self.snowflake(), "owner")
        self.guild_id = self.snowflake()
        self.guild_name = guild_name
        self.channel_id = self.snowflake()
        self.requests: list[Recorded] = []
        # The CDN: a file's path (as in its attachment `url`) -> its bytes; every download's path.
        self.cdn: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self.channels: dict[int, dict[str, Any]] = {}
        self.dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self.commands: list[dict[str, Any]] = []
        self.modals: list[dict[str, Any]] = []  # every modal the bot answered a click with (type 9)
        self.identify_payloads: list[dict[str, Any]] = []
        self.login_failures = 0  # answer GET /users/@me with 400 this many times (a non-fatal failure)
        self.reject_token = False
        # The application's flags (GET /applications/@me), e.g. 1 << 19 for the Message Content
        # intent of an unverified bot.
        self.app_flags = 0
        self.response_delay = 0.0
        self._interactions: dict[str, dict[str, Any]] = {}  # token -> state
        self._expired_tokens: set[str] = set()
        self._injected: list[_Injected] = []
        self._gateways: list[_Gateway] = []
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self.channels[self.channel_id] = self._text_channel(self.channel_id, "general")

    # --- lifecycle --------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway-ws", self._gateway)
        app.router.add_get("/attachments/{tail:.*}", self._download)
        app.router.add_route("*", API_PREFIX + "/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        assert server is not None and server.sockets
        self._port = int(server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for gw in list(self._gateways):
            with contextlib.suppress(Exception):
                await gw.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}{API_PREFIX}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway-ws"

    # --- ids and payloads ---------------------------------------------------------------------------

    def snowflake(self) -> int:
        """A real-looking snowflake: discord.py reads creation times (and token expiry) from ids."""
        stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._last_id = max(self._last_id + 1, stamp)
        return self._last_id

    def user(self, name: str, *, bot: bool = False) -> FakeUser:
        return FakeUser(self.snowflake(), name, bot=bot)

    def _member(self, user: FakeUser | None = None) -> dict[str, Any]:
        member: dict[str, Any] = {
            "roles": [],
            "joined_at": _now_iso(),
            "deaf": False,
            "mute": False,
            "flags": 0,  # discord.py requires it
            "nick": None,
            "avatar": None,
            "pending": False,
            "communication_disabled_until": None,
        }
        if user is not None:
            member["user"] = user.payload()
        return member

    def _text_channel(self, channel_id: int, name: str) -> dict[str, Any]:
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(self.guild_id),
            "name": name,
            "position": 0,
            "permission_overwrites": [],
            "parent_id": None,
            "nsfw": False,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }

    def add_text_channel(self, name: str) -> int:
        """A second channel, known before the bot connects (it comes in GUILD_CREATE)."""
        channel_id = self.snowflake()
        self.channels[channel_id] = self._text_channel(channel_id, name)
        return channel_id

    def _guild(self) -> dict[str, Any]:
        everyone = {
            "id": str(self.guild_id),
            "name": "@everyone",
            "permissions": str((1 << 41) - 1),
            "position": 0,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
        return {
            "id": str(self.guild_id),
            "name": self.guild_name,
            "icon": None,
            "owner_id": str(self.owner.id),
            "roles": [everyone],
            "emojis": [],
            "stickers": [],
            "features": [],
            "member_count": 2,
            "members": [self._member(self.bot)],
            "channels": [c for c in self.channels.values() if c["type"] == 0],
            "threads": [c for c in self.channels.values() if c["type"] == 11],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "large": False,
            "unavailable": False,
            "joined_at": _now_iso(),
            "premium_tier": 0,
            "mfa_level": 0,
            "verification_level": 0,
            "explicit_content_filter": 0,
            "default_message_notifications": 0,
            "system_channel_flags": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "afk_timeout": 300,
        }

    def _message(
        self,
        *,
        channel_id: int,
        author: FakeUser,
        content: str,
        message_id: int | None = None,
        mentions: list[FakeUser] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        msg: dict[str, Any] = {
            "id": str(message_id or self.snowflake()),
            "channel_id": str(channel_id),
            "author": author.payload(),
            "content": content,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [{**u.payload(), "member": self._member()} for u in mentions or []],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if channel is not None and channel.get("guild_id"):
            msg["guild_id"] = channel["guild_id"]
            msg["member"] = self._member()
        msg.update(extra or {})
        return msg

    # --- waiting on what the bot sent ---------------------------------------------------------------

    def find(self, method: str, path: str) -> list[Recorded]:
        """Requests whose method matches and whose path matches the regex `path` entirely."""
        pattern = re.compile(path)
        return [r for r in self.requests if r.method == method and pattern.fullmatch(r.path)]

    async def wait_for(
        self, method: str, path: str, *, count: int = 1, within: float = 10.0
    ) -> list[Recorded]:
        """Wait (bounded) until at least `count` matching requests were answered."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.find(method, path)) >= count)
        return self.find(method, path)

    async def wait_until(self, predicate: Callable[[], bool], *, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def bot_messages(self, channel_id: int | None = None) -> list[dict[str, Any]]:
        """Messages the bot posted (channel messages and interaction replies), oldest first."""
        out = [m for m in self.messages.values() if m["author"]["id"] == str(self.bot.id)]
        if channel_id is not None:
            out = [m for m in out if m["channel_id"] == str(channel_id)]
        return sorted(out, key=lambda m: int(m["id"]))

    # --- scripting failures ---------------------------------------------------------------------------

    def rate_limit_next(self, method: str, path: str, *, retry_after: float = 0.05, times: int = 1) -> None:
        """Answer the next `times` matching requests with a 429 shaped like Discord's."""
        headers = {
            # Without `Via` discord.py assumes a Cloudflare ban and raises instead of waiting.
            "Via": "1.1 google",
            "Retry-After": str(max(1, round(retry_after))),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": str(retry_after),
            "X-RateLimit-Reset": str(time.time() + retry_after),
            "X-RateLimit-Bucket": "fake-bucket",
            "X-RateLimit-Scope": "user",
        }
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        self._injected.append(_Injected(method, re.compile(path), 429, body, headers, times))

    def fail_next(
        self, method: str, path: str, *, status: int, code: int = 0, message: str = "", times: int = 1
    ) -> None:
        """Answer the next `times` matching requests with an error."""
        body = {"message": message or f"{status}: fake error", "code": code}
        self._injected.append(_Injected(method, re.compile(path), status, body, {}, times))

    def expire_token(self, token: str) -> None:
        """The interaction token's 15 minutes are over: its webhook routes now 404 (Unknown Webhook)."""
        self._expired_tokens.add(token)

    # --- gateway --------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return any(gw.ready and not gw.ws.closed for gw in self._gateways)

    async def wait_ready(self, within: float = 10.0) -> None:
        await self.wait_until(lambda: self.connected, within=within)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        gw = _Gateway(ws)
        self._gateways.append(gw)
        try:
            await ws.send_str(
                json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
            )
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                op = data.get("op")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
                elif op == 2:
                    self.identify_payloads.append(data["d"])
                    shard_id, count = data["d"].get("shard") or (0, 1)
                    gw.shard = (int(shard_id), int(count))
                    await self._send_ready(gw)
                elif op == 6:
                    await self._send(gw, "RESUMED", {})
                    gw.ready = True
                    await self._notify()
        finally:
            gw.ready = False
            self._gateways.remove(gw)
            await self._notify()
        return ws

    async def _send(self, gw: _Gateway, event: str, data: dict[str, Any]) -> None:
        async with gw.lock:
            gw.seq += 1
            await gw.ws.send_str(json.dumps({"op": 0, "t": event, "s": gw.seq, "d": data}))

    async def _send_ready(self, gw: _Gateway) -> None:
        ready = {
            "v": 10,
            "user": {**self.bot.payload(), "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": str(self.guild_id), "unavailable": True}] if _serves(gw, self.guild_id) else [],
            "session_id": f"session-{self.snowflake()}",
            "resume_gateway_url": self.gateway_url,
            "private_channels": [],
            "relationships": [],
            "application": {"id": str(self.app_id), "flags": 0},
            "shard": list(gw.shard),
        }
        await self._send(gw, "READY", ready)
        if _serves(gw, self.guild_id):
            await self._send(gw, "GUILD_CREATE", self._guild())
        gw.ready = True
        await self._notify()

    def _intents(self) -> int:
        return int(self.identify_payloads[-1].get("intents", 0)) if self.identify_payloads else 0

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a gateway event to every connected client, on the shard that serves its guild."""
        guild_id = data.get("guild_id")
        for gw in [g for g in self._gateways if g.ready and _serves(g, int(guild_id) if guild_id else None)]:
            await self._send(gw, event, data)

    async def disconnect(self, code: int = 4000) -> None:
        """Drop every gateway connection (the client reconnects or dies, depending on `code`)."""
        for gw in list(self._gateways):
            await gw.ws.close(code=code)

    # --- the CDN ----------------------------------------------------------------------------------------

    def attachment(
        self,
        filename: str,
        data: bytes,
        *,
        content_type: str | None = None,
        channel_id: int | None = None,
        served: bool = True,
    ) -> dict[str, Any]:
        """An attachment payload as Discord sends it in a message or an interaction's `resolved`, its
        bytes served at its `url` (a signed CDN link, as Discord's are); not `served`: a deleted file."""
        attachment_id = self.snowflake()
        path = f"/attachments/{channel_id or self.channel_id}/{attachment_id}/{filename}"
        if served:
            self.cdn[path] = data
        signed = f"?ex={int(time.time()) + 86400:x}&is={int(time.time()):x}&hm={'0' * 64}&"
        payload: dict[str, Any] = {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data),
            "url": f"http://127.0.0.1:{self._port}{path}{signed}",
            "proxy_url": f"http://127.0.0.1:{self._port}{path}{signed}",
        }
        if content_type:
            payload["content_type"] = content_type
        return payload

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """A GET of a CDN link: the file's bytes, or Discord's CDN 404 for a file that is not there."""
        self.downloads.append(request.path)
        await self._notify()
        data = self.cdn.get(request.path)
        if data is None:
            return web.Response(status=404, text="Not Found", content_type="text/plain")
        return web.Response(body=data, content_type="application/octet-stream")

    # --- user actions ---------------------------------------------------------------------------------

    def _channel_for_dm(self, user: FakeUser) -> int:
        if user.id not in self.dm_channels:
            channel_id = self.snowflake()
            self.dm_channels[user.id] = channel_id
            self.channels[channel_id] = {
                "id": str(channel_id),
                "type": 1,
                "last_message_id": None,
                "recipients": [user.payload()],
            }
        return self.dm_channels[user.id]

    def dm_channel(self, user: FakeUser) -> int:
        """The user's DM channel with the bot (opened now if it was not)."""
        return self._channel_for_dm(user)

    def bot_posted(self, channel_id: int, content: str) -> dict[str, Any]:
        """A message the bot posted before this test's bot ran (a process that stopped since)."""
        msg = self._message(channel_id=channel_id, author=self.bot, content=content)
        self.messages[int(msg["id"])] = msg
        return msg

    async def user_says(
        self,
        user: FakeUser,
        content: str,
        *,
        channel_id: int | None = None,
        mention_bot: bool = False,
        message_id: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A user posts in a guild channel or thread (default: the main channel); MESSAGE_CREATE.
        `attachments` are payloads made with `attachment`."""
        channel = channel_id or self.channel_id
        text = f"<@{self.bot.id}> {content}" if mention_bot else content
        files = list(attachments or [])
        # Without the privileged intent Discord blanks guild content (its text and its attachments)
        # unless the bot is mentioned.
        if not mention_bot and not self._intents() & MESSAGE_CONTENT_INTENT:
            text, files = "", []
        msg = self._message(
            channel_id=channel,
            author=user,
            content=text,
            message_id=message_id,
            mentions=[self.bot] if mention_bot else [],
            extra={"attachments": files},
        )
        self.messages[int(msg["id"])] = msg
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    async def user_dms(
        self,
        user: FakeUser,
        content: str,
        *,
        message_id: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A user writes to the bot in a DM (with `attachment` payloads); MESSAGE_CREATE without a guild."""
        channel = self._channel_for_dm(user)
        msg = self._message(
            channel_id=channel,
            author=user,
            content=content,
            message_id=message_id,
            extra={"attachments": list(attachments or [])},
        )
        self.messages[int(msg["id"])] = msg
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def _interaction_base(self, user: FakeUser, channel_id: int | None, kind: int) -> dict[str, Any]:
        interaction_id = self.snowflake()
        token = f"itoken-{interaction_id}"
        channel = self.channels[channel_id] if channel_id else self.channels[self._channel_for_dm(user)]
        data: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(self.app_id),
            "type": kind,
            "token": token,
            "version": 1,
            "channel_id": channel["id"],
            "channel": channel,
            "app_permissions": str((1 << 41) - 1),
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(self.guild_id)},
            "attachment_size_limit": 10 * 1024 * 1024,  # discord.py requires it
        }
        if channel.get("guild_id"):
            data["guild_id"] = str(self.guild_id)
            data["guild_locale"] = "en-US"
            data["member"] = {**self._member(user), "permissions": str((1 << 41) - 1)}
            data["context"] = 0
        else:
            data["user"] = user.payload()
            data["context"] = 1
        self._interactions[token] = {"id": interaction_id, "channel_id": int(channel["id"]), "original": None}
        return data

    async def slash(
        self,
        user: FakeUser,
        name: str,
        options: dict[str, str] | None = None,
        *,
        channel_id: int | None = None,
        files: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A user runs a slash command in a guild channel or thread (or, with no channel_id, in a DM).
        `files`: attachment options (name -> an `attachment` payload), sent as Discord does: the
        option's value is the attachment's id, its payload under `resolved.attachments`."""
        command = next((c for c in self.commands if c["name"] == name), None)
        data = self._interaction_base(user, channel_id, 2)
        data["data"] = {
            "id": command["id"] if command else str(self.snowflake()),
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        if files:
            data["data"]["options"] += [{"name": k, "type": 11, "value": a["id"]} for k, a in files.items()]
            data["data"]["resolved"] = {"attachments": {a["id"]: a for a in files.values()}}
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def click(self, user: FakeUser, message: dict[str, Any], custom_id: str) -> dict[str, Any]:
        """A user clicks a button on a message; INTERACTION_CREATE of type component."""
        channel_id = int(message["channel_id"])
        data = self._interaction_base(user, channel_id if channel_id in self.channels else None, 3)
        data["message"] = message
        data["data"] = {"custom_id": custom_id, "component_type": 2}
        # A component interaction's "original response" is the message the component is on.
        self._interactions[data["token"]]["original"] = int(message["id"])
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def autocomplete(
        self, user: FakeUser, name: str, option: str, typed: str, *, channel_id: int | None = None
    ) -> dict[str, Any]:
        """A user types into a slash command's option that offers choices; type 4 interaction."""
        command = next((c for c in self.commands if c["name"] == name), None)
        data = self._interaction_base(user, channel_id, 4)
        data["data"] = {
            "id": command["id"] if command else str(self.snowflake()),
            "name": name,
            "type": 1,
            "options": [{"name": option, "type": 3, "value": typed, "focused": True}],
        }
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    def interaction_token(self, interaction: dict[str, Any]) -> str:
        return str(interaction["token"])

    def modal_for(self, interaction: dict[str, Any]) -> dict[str, Any] | None:
        """The modal the bot answered this interaction with (callback type 9), if it did."""
        modal: dict[str, Any] | None = self._interactions[interaction["token"]].get("modal")
        return modal

    async def submit_modal(
        self, user: FakeUser, opened_by: dict[str, Any], values: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A user submits the modal the bot answered `opened_by` with; MODAL_SUBMIT (type 5).

        As in Discord, every field sends what it shows: a text input its pre-filled value and a
        select its default options, unless `values` (by the input's custom_id) says what was typed
        (a string) or picked (a list of option values).
        """
        modal = self.modal_for(opened_by)
        if modal is None:
            raise AssertionError("the bot did not answer that interaction with a modal")
        channel_id = int(opened_by["channel_id"])
        data = self._interaction_base(user, channel_id if channel_id in self.channels else None, 5)
        data["data"] = {
            "custom_id": modal["custom_id"],
            "components": [_submitted(c, values or {}) for c in modal["components"]],
        }
        if "message" in opened_by:
            # A modal opened from a message's button comes back with that message.
            data["message"] = opened_by["message"]
            self._interactions[data["token"]]["original"] = int(opened_by["message"]["id"])
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    # --- REST -----------------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body_json: Any = None
        parts: list[Part] = []
        if request.content_type == "application/json":
            raw = await request.read()
            body_json = json.loads(raw) if raw else None
        elif request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue
                data = await part.read()
                parts.append(
                    Part(
                        name=part.name or "",
                        filename=part.filename,
                        content_type=part.headers.get("Content-Type", ""),
                        data=bytes(data),
                    )
                )
        if self.response_delay:
            await asyncio.sleep(self.response_delay)
        response = self._injected_response(request.method, path) or await self._route(
            request, path, body_json, parts
        )
        record = Recorded(
            method=request.method,
            path=path,
            query=dict(request.query),
            json=body_json,
            parts=tuple(parts),
            at=asyncio.get_running_loop().time(),
            status=response.status,
        )
        self.requests.append(record)
        await self._notify()
        return response

    def _injected_response(self, method: str, path: str) -> web.Response | None:
        for item in self._injected:
            if item.times > 0 and item.method == method and item.pattern.fullmatch(path):
                item.times -= 1
                return _json(item.body, item.status, item.headers)
        return None

    async def _route(self, request: web.Request, path: str, body: Any, parts: list[Part]) -> web.Response:
        payload = body
        if payload is None:
            for part in parts:
                if part.name == "payload_json":
                    payload = json.loads(part.data)
        payload = payload if payload is not None else {}
        method = request.method
        auth = request.headers.get("Authorization", "")
        files = [p for p in parts if p.filename]

        if path == "/users/@me" and method == "GET":
            if self.reject_token or auth != f"Bot {self.token}":
                return _json({"message": "401: Unauthorized", "code": 0}, 401)
            if self.login_failures > 0:
                self.login_failures -= 1
                return _json({"message": "400: Bad Request", "code": 0}, 400)
            return _json({**self.bot.payload(), "verified": True, "mfa_enabled": False, "flags": 0})
        if path in ("/applications/@me", "/oauth2/applications/@me") and method == "GET":
            return _json(self._application())
        if path in ("/gateway", "/gateway/bot") and method == "GET":
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})
        if m := re.fullmatch(r"/applications/(\d+)(?:/guilds/(\d+))?/commands", path):
            if method == "PUT":
                self.commands = [
                    {
                        **cmd,
                        "id": str(self.snowflake()),
                        "application_id": m.group(1),
                        "version": str(self.snowflake()),
                        **({"guild_id": m.group(2)} if m.group(2) else {}),
                    }
                    for cmd in payload
                ]
                return _json(self.commands)
            return _json(self.commands)
        if m := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path):
            return self._interaction_callback(m.group(2), payload, files)
        if m := re.fullmatch(r"/webhooks/(\d+)/([^/]+)(?:/messages/(@original|\d+))?", path):
            return self._webhook(method, m.group(2), m.group(3), payload, files)
        if (m := re.fullmatch(r"/channels/(\d+)/messages", path)) and method == "POST":
            return self._post_message(int(m.group(1)), payload, files)
        if m := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path):
            msg = self.messages.get(int(m.group(2)))
            if msg is None:
                return _json({"message": "Unknown Message", "code": 10008}, 404)
            if method == "PATCH":
                msg.update(self._edited_fields(payload))
                msg["edited_timestamp"] = _now_iso()
            return _json(msg)
        if (m := re.fullmatch(r"/channels/(\d+)/messages/(\d+)/threads", path)) and method == "POST":
            return await self._start_thread(int(m.group(1)), int(m.group(2)), payload)
        if re.fullmatch(r"/channels/(\d+)/typing", path) and method == "POST":
            return web.Response(status=204)
        if path == "/users/@me/channels" and method == "POST":
            user = FakeUser(int(payload["recipient_id"]), f"user-{payload['recipient_id']}")
            channel_id = self._channel_for_dm(user)
            return _json(self.channels[channel_id])
        return _json({"message": f"404: Not Found ({method} {path} is not in the fake)", "code": 0}, 404)

    def _application(self) -> dict[str, Any]:
        return {
            "id": str(self.app_id),
            "name": "nerve",
            "icon": None,
            "description": "",
            "summary": "",
            "bot_public": True,
            "bot_require_code_grant": False,
            "owner": self.owner.payload(),
            "verify_key": "0" * 64,
            "flags": self.app_flags,
            "team": None,
            "rpc_origins": [],
            "interactions_endpoint_url": None,
            "bot": self.bot.payload(),
        }

    _MESSAGE_FIELDS = ("content", "embeds", "components", "allowed_mentions", "flags", "message_reference")

    @classmethod
    def _message_fields(cls, payload: dict[str, Any]) -> dict[str, Any]:
        out = {k: payload[k] for k in cls._MESSAGE_FIELDS if k in payload}
        out.setdefault("embeds", [])
        out.setdefault("components", [])
        return out

    @classmethod
    def _edited_fields(cls, payload: dict[str, Any]) -> dict[str, Any]:
        """An edit changes only what it sends, as Discord's PATCH does."""
        return {k: payload[k] for k in cls._MESSAGE_FIELDS if k in payload}

    def _post_message(self, channel_id: int, payload: dict[str, Any], files: list[Part]) -> web.Response:
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, 404)
        nonce = payload.get("nonce")
        if nonce is not None and payload.get("enforce_nonce"):
            # As Discord does: a message of the same author with the same nonce (within minutes) is
            # returned instead of a new one being created.
            for earlier in self.messages.values():
                here = earlier["channel_id"] == str(channel_id)
                if (
                    here
                    and earlier["author"]["id"] == str(self.bot.id)
                    and earlier.get("nonce") == str(nonce)
                ):
                    return _json(earlier)
        msg = self._message(channel_id=channel_id, author=self.bot, content=payload.get("content") or "")
        if nonce is not None:
            msg["nonce"] = str(nonce)
        msg.update(self._message_fields(payload))
        msg["attachments"] = [self._attachment(p) for p in files]
        self.messages[int(msg["id"])] = msg
        return _json(msg)

    def _attachment(self, part: Part) -> dict[str, Any]:
        return self.attachment(part.filename or "file", part.data, content_type=part.content_type or None)

    def _interaction_callback(self, token: str, payload: dict[str, Any], files: list[Part]) -> web.Response:
        state = self._interactions.get(token)
        if state is None:
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        if state.get("acknowledged"):
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060}, 400)
        state["acknowledged"] = True
        kind = int(payload.get("type", 0))
        data = payload.get("data") or {}
        flags = int(data.get("flags", 0))
        result: dict[str, Any] = {
            "interaction": {
                "id": str(state["id"]),
                "type": 2,
                "response_message_ephemeral": bool(flags & 64),
            },
            "resource": {"type": kind},
        }
        if kind == 9:
            problem = _modal_problem(data)
            if problem is not None:
                state["acknowledged"] = False
                return _json({"message": f"Invalid Form Body: {problem}", "code": 50035}, 400)
            state["modal"] = data
            self.modals.append(data)
        if kind in (4, 5):
            loading = kind == 5
            msg = self._message(
                channel_id=state["channel_id"], author=self.bot, content=data.get("content") or ""
            )
            msg.update(self._message_fields(data))
            msg["flags"] = flags | (128 if loading else 0)
            msg["interaction_token"] = token
            msg["attachments"] = [self._attachment(p) for p in files]
            self.messages[int(msg["id"])] = msg
            state["original"] = int(msg["id"])
            result["interaction"]["response_message_id"] = msg["id"]
            result["interaction"]["response_message_loading"] = loading
            if not loading:
                result["resource"]["message"] = msg
        return _json(result)

    def _webhook(
        self, method: str, token: str, which: str | None, payload: dict[str, Any], files: list[Part]
    ) -> web.Response:
        state = self._interactions.get(token)
        if state is None or token in self._expired_tokens:
            return _json({"message": "Unknown Webhook", "code": 10015}, 404)
        if which is None and method == "POST":
            msg = self._message(
                channel_id=state["channel_id"], author=self.bot, content=payload.get("content") or ""
            )
            msg.update(self._message_fields(payload))
            msg["webhook_id"] = str(self.app_id)
            msg["interaction_token"] = token
            msg["attachments"] = [self._attachment(p) for p in files]
            self.messages[int(msg["id"])] = msg
            return _json(msg)
        message_id = state["original"] if which == "@original" else int(which or 0)
        found = self.messages.get(message_id or 0)
        if found is None:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        msg = found
        if method == "PATCH":
            msg.update(self._edited_fields(payload))
            msg["flags"] = int(msg.get("flags", 0)) & ~128
            msg["edited_timestamp"] = _now_iso()
            if files:
                msg["attachments"] = [self._attachment(p) for p in files]
        elif method == "DELETE":
            del self.messages[message_id]
            return web.Response(status=204)
        return _json(msg)

    async def _start_thread(self, channel_id: int, message_id: int, payload: dict[str, Any]) -> web.Response:
        parent = self.channels.get(channel_id)
        if parent is None or parent["type"] != 0:
            return _json({"message": "Cannot start a thread here", "code": 50024}, 400)
        if message_id in self.channels:
            return _json(
                {"message": "A thread has already been created for this message", "code": 160004}, 400
            )
        thread = {
            # Discord gives a thread started from a message the message's id.
            "id": str(message_id),
            "type": 11,
            "guild_id": str(self.guild_id),
            "parent_id": str(channel_id),
            "owner_id": str(self.bot.id),
            "name": payload.get("name", "thread"),
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": int(payload.get("auto_archive_duration", 1440)),
                "archive_timestamp": _now_iso(),
                "locked": False,
                "create_timestamp": _now_iso(),
            },
            "member": {
                "id": str(message_id),
                "user_id": str(self.bot.id),
                "join_timestamp": _now_iso(),
                "flags": 0,
            },
        }
        self.channels[message_id] = thread
        await self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return _json(thread)


# --- modals ------------------------------------------------------------------------------------------


def _modal_problem(modal: dict[str, Any]) -> str | None:
    """What Discord would refuse in a modal (its documented limits), or None."""
    if not 1 <= len(modal.get("title") or "") <= 45:
        return "title must be 1 to 45 characters"
    if not 1 <= len(modal.get("custom_id") or "") <= 100:
        return "custom_id must be 1 to 100 characters"
    components = modal.get("components") or []
    if not 1 <= len(components) <= 5:
        return "a modal holds 1 to 5 components"
    for top in components:
        if top.get("type") != 18:
            continue
        if not 1 <= len(top.get("label") or "") <= 45:
            return "a label's text must be 1 to 45 characters"
        if len(top.get("description") or "") > 100:
            return "a label's description must be at most 100 characters"
        inner = top.get("component") or {}
        if not 1 <= len(inner.get("custom_id") or "") <= 100:
            return "an input's custom_id must be 1 to 100 characters"
        if len(inner.get("placeholder") or "") > (100 if inner.get("type") == 4 else 150):
            return "a placeholder is too long"
        if inner.get("type") == 4:
            longest = int(inner.get("max_length") or 4000)
            if longest > 4000 or int(inner.get("min_length") or 0) > longest:
                return "a text input's lengths are out of range"
            if len(inner.get("value") or "") > longest:
                return "a text input's value is longer than its max_length"
        elif inner.get("type") == 3:
            options = inner.get("options") or []
            most, least = int(inner.get("max_values", 1)), int(inner.get("min_values", 1))
            if not 1 <= len(options) <= 25 or not 0 <= least <= most <= len(options):
                return "a select's options or value counts are out of range"
            if any(len(o["label"]) > 100 or len(o["value"]) > 100 for o in options):
                return "a select option is too long"
            if sum(1 for o in options if o.get("default")) > most:
                return "a select has more default options than it takes"
    return None


def _submitted(component: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """One component of a modal as its submit carries it."""
    kind = component.get("type")
    if kind == 18:
        return {"type": 18, "component": _submitted(component["component"], values)}
    if kind == 1:
        return {"type": 1, "components": [_submitted(c, values) for c in component.get("components", [])]}
    custom_id = component.get("custom_id")
    if kind == 4:
        return {
            "type": 4,
            "custom_id": custom_id,
            "value": values.get(custom_id, component.get("value") or ""),
        }
    if kind == 3:
        shown = [o["value"] for o in component.get("options", []) if o.get("default")]
        return {"type": 3, "custom_id": custom_id, "values": list(values.get(custom_id, shown))}
    return {"type": kind}


# --- running the real bot against the fake ------------------------------------------------------------


def settings_for(fake: FakeDiscord, **overrides: Any) -> Settings:
    """Settings that point the bot at the fake (and at nothing from the environment or `.env`)."""
    values: dict[str, Any] = {
        "discord_bot_token": fake.token,
        "discord_api_base_url": fake.api_base_url,
        "discord_gateway_url": fake.gateway_url,
        "discord_guild_id": fake.guild_id,
        # /healthz, /readyz and /metrics on a free port of this machine only.
        "nerve_http_host": "127.0.0.1",
        "nerve_http_port": 0,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@contextlib.asynccontextmanager
async def running_bot(fake: FakeDiscord, agent: Any, **overrides: Any) -> AsyncIterator[NerveDiscordBot]:
    """The real `NerveDiscordBot`, logged in and connected to the fake; closed on exit."""
    bot = new_bot(agent, settings_for(fake, **overrides))
    started = asyncio.create_task(bot.start(fake.token), name="discord-bot")
    try:
        # Waiting for the gateway's READY + GUILD_CREATE, not for `on_ready`: discord.py holds that
        # back for `guild_ready_timeout` (2 s), while events are already handled in order.
        connected = asyncio.create_task(fake.wait_ready())
        async with asyncio.timeout(10):
            done, _ = await asyncio.wait({started, connected}, return_when=asyncio.FIRST_COMPLETED)
        if started in done:
            connected.cancel()
            started.result()
            raise AssertionError("the bot stopped before it connected")
        await connected
        yield bot
    finally:
        await bot.close()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            async with asyncio.timeout(10):
                await started

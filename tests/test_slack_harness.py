"""The rig the Slack tests share: fake Slack + fake model service + the real agent, store and bolt app.

Only what is outside the machine is faked (Slack, the model provider), at the network boundary.
No tests live here; the test modules import `rig`, the event builders and `deliver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from adapters.settings import Settings
from adapters.slack.app import SlackBot, build_bot
from adapters.slack.client import make_client
from adapters.slack.serve import serve_http
from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from bot.seams import ToolHost
from bot.store.base import ConversationStore
from bot.types import CallContext, ToolResult, ToolSpec
from tests.fakes.llm_server import FakeLLMServer, Responder, Step, own_text
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.stores import Backend, default_backend

SIGNING_SECRET = "test-signing-secret"
_event_ids = itertools.count(1)
_ts = itertools.count(1)

ToolFn = Callable[[dict[str, Any]], ToolResult]


class StaticHost:
    """A tool host with fixed tools; each call is answered by a plain function."""

    def __init__(self, tools: dict[str, ToolFn] | None = None) -> None:
        self._tools = tools or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=name,
                description=f"{name} tool",
                parameters={"type": "object", "properties": {}},
                server="static",
                original_name=name,
            )
            for name in self._tools
        ]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        self.calls.append((name, arguments))
        return self._tools[name](arguments)

    def starting(self) -> list[str]:
        return []


def settings_for(slack: FakeSlack, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": "xoxb-test-token",
        "slack_app_token": None,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_base_url": slack.api_url,
        "nerve_http_port": 0,
        "nerve_slack_follow_threads": False,
        "nerve_slack_allow_bots": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Rig:
    slack: FakeSlack
    llm: FakeLLMServer
    backend: Backend
    store: ConversationStore
    agent: Agent
    bot: SlackBot
    host: StaticHost
    url: str
    http: aiohttp.ClientSession

    async def deliver_raw(self, raw: str, content_type: str) -> tuple[int, str]:
        """POST a signed raw body (slash commands are form-encoded); returns status and response text."""
        headers = sign(raw)
        headers["Content-Type"] = content_type
        async with self.http.post(self.url, data=raw, headers=headers) as response:
            return response.status, await response.text()

    async def deliver(
        self,
        body: dict[str, Any],
        *,
        retry_num: int | None = None,
        secret: str = SIGNING_SECRET,
        timestamp: int | None = None,
    ) -> int:
        """POST a signed Events API delivery to the app; returns the HTTP status of the ack."""
        raw = json.dumps(body)
        headers = sign(raw, secret, timestamp)
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        async with self.http.post(self.url, data=raw, headers=headers) as response:
            await response.read()
            return response.status

    async def settle(self, within: float = 10.0) -> None:
        """Wait (bounded) until every background turn has finished."""
        async with asyncio.timeout(within):
            await self.bot.idle()


def sign(raw: str, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{raw}".encode(), hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
    }


class WatchedInbox:
    """The store's inbox, with a way to wait until an event is marked finished."""

    def __init__(self, store: ConversationStore) -> None:
        self._store = store
        self.finished: list[str] = []
        self._changed = asyncio.Condition()

    async def claim_event(self, platform: str, event_id: str, payload: str) -> bool:
        return await self._store.claim_event(platform, event_id, payload)

    async def finish_event(self, platform: str, event_id: str) -> None:
        await self._store.finish_event(platform, event_id)
        async with self._changed:
            self.finished.append(event_id)
            self._changed.notify_all()

    async def unfinished_events(self, platform: str) -> list[tuple[str, str]]:
        return await self._store.unfinished_events(platform)

    async def unfinished_payload(self, platform: str, event_id: str) -> str | None:
        return await self._store.unfinished_payload(platform, event_id)

    # What each turn posted (`bot.store.posts`), from the store as in production.
    async def posts_of(self, turn: str) -> dict[str, str | None]:
        return await self._store.posts_of(turn)

    async def intend_post(self, turn: str, part: str) -> None:
        await self._store.intend_post(turn, part)

    async def record_post(self, turn: str, part: str, ref: str) -> None:
        await self._store.record_post(turn, part, ref)

    async def prune_posts(self, older_than_days: float) -> int:
        return await self._store.prune_posts(older_than_days)

    async def wait_finished(self, event_id: str, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: event_id in self.finished)


@dataclass
class Core:
    slack: FakeSlack
    llm: FakeLLMServer
    backend: Backend
    store: ConversationStore
    agent: Agent
    host: StaticHost
    inbox: WatchedInbox


@contextlib.asynccontextmanager
async def core(
    tmp_path: Path,
    script: Sequence[Step] | Responder,
    *,
    tools: dict[str, ToolFn] | None = None,
    strict: bool = True,
    host: ToolHost | None = None,
    config: AgentConfig | None = None,
    approvals: bool = False,
    clock: Callable[[], float] = time.time,
    backend: Backend | None = None,
    memories: bool = False,
    schedules: bool = False,
    shared_turns: bool = False,
) -> AsyncIterator[Core]:
    """Fake Slack, fake model service, and the real agent on a real store (which parks turns that
    wait for approval when `approvals` is set, and keeps memories with the built-in memory tools
    when `memories` is, and schedules with the built-in schedule tools when `schedules` and
    `approvals` are): SQLite, or the test's `backend` (both_stores). With `shared_turns` its turns
    take the store's lock, as in production, shared with any other process on the database."""
    async with (
        FakeSlack() as slack,
        FakeLLMServer(script, strict=strict) as llm,
        contextlib.AsyncExitStack() as stack,
    ):
        if backend is None:  # SQLite, or PostgreSQL when the suite runs on it (NERVE_TEST_STORE)
            backend = await stack.enter_async_context(default_backend(tmp_path))
        store = await backend.open()
        model = OpenAILLM(model="test-model", base_url=llm.base_url, api_key=None, timeout=30, max_retries=0)
        static = StaticHost(tools)
        inbox = WatchedInbox(store)
        agent = Agent(
            llm=model,
            host=host or static,
            store=store,
            inbox=inbox,
            config=config or AgentConfig(),
            approvals=store if approvals else None,
            clock=clock,
            memories=store if memories else None,
            schedules=store if schedules else None,
            turn_lock=store.turn_lock if shared_turns else None,
        )
        try:
            yield Core(
                slack=slack, llm=llm, backend=backend, store=store, agent=agent, host=static, inbox=inbox
            )
        finally:
            await model.aclose()
            await store.close()


@contextlib.asynccontextmanager
async def rig(
    tmp_path: Path,
    script: Sequence[Step] | Responder,
    *,
    tools: dict[str, ToolFn] | None = None,
    pace: float = 0.0,
    status_interval: float = 0.0,
    stream_interval: float = 0.0,
    strict: bool = True,
    host: ToolHost | None = None,
    config: AgentConfig | None = None,
    approvals: bool = False,
    clock: Callable[[], float] = time.time,
    memories: bool = False,
    backend: Backend | None = None,
    schedules: bool = False,
    shared_turns: bool = False,
    **settings: Any,
) -> AsyncIterator[Rig]:
    """Everything running on 127.0.0.1: fake Slack, fake model, real agent + store + bolt app over HTTP."""
    async with core(
        tmp_path,
        script,
        tools=tools,
        strict=strict,
        host=host,
        config=config,
        approvals=approvals,
        clock=clock,
        backend=backend,
        memories=memories,
        schedules=schedules,
        shared_turns=shared_turns,
    ) as c:
        cfg = settings_for(c.slack, **settings)
        bot = build_bot(
            c.agent,
            cfg,
            client=make_client(cfg),
            pace=pace,
            status_interval=status_interval,
            stream_interval=stream_interval,
            feedback=c.store,
        )
        runner: web.AppRunner | None = None
        try:
            runner, url = await serve_http(bot, "127.0.0.1", 0)
            async with aiohttp.ClientSession() as http:
                yield Rig(
                    slack=c.slack,
                    llm=c.llm,
                    backend=c.backend,
                    store=c.store,
                    agent=c.agent,
                    bot=bot,
                    host=c.host,
                    url=url,
                    http=http,
                )
        finally:
            await bot.aclose()
            if runner is not None:
                await runner.cleanup()


# --- Events API bodies ---------------------------------------------------------------------------


def next_ts() -> str:
    return f"1600000000.{next(_ts):06d}"


def event_body(event: dict[str, Any], *, event_id: str | None = None, team: str = TEAM_ID) -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": team,
        "api_app_id": "A0000APP",
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "event": event,
    }


def mention(
    text: str,
    *,
    channel: str = "C0CHANNEL",
    user: str = "U0ALICE",
    ts: str | None = None,
    thread_ts: str | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": text,
        "ts": ts or next_ts(),
        "channel": channel,
        "team": TEAM_ID,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event_body(event, event_id=event_id)


def message(
    text: str,
    *,
    channel: str = "C0CHANNEL",
    user: str | None = "U0ALICE",
    ts: str | None = None,
    thread_ts: str | None = None,
    channel_type: str = "channel",
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": ts or next_ts(),
        "channel": channel,
        "channel_type": channel_type,
        "team": TEAM_ID,
        **extra,
    }
    if user is not None:
        event["user"] = user
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event_body(event, event_id=event_id)


def dm(text: str, *, channel: str = "D0ALICE", user: str = "U0ALICE", **kw: Any) -> dict[str, Any]:
    return message(text, channel=channel, user=user, channel_type="im", **kw)


def user_texts(request: dict[str, Any]) -> list[str]:
    """The user messages a model request carried, as their people wrote them (without the turn's note)."""
    return [own_text(m.get("content")) for m in request["messages"] if m.get("role") == "user"]

"""The rig the Slack load scenarios share: nerve's real Slack adapter on this event loop, everything
outside nerve (Slack's Web API, the model service, the load generator) on another.

Built from `bench/slack_bench.py`'s parts (`_Elsewhere`, the signed deliveries, a host without
tools) so every load figure is taken the same way: signed Events API deliveries into bolt's aiohttp
adapter, the real agent and SQLite store, the `openai` client against the local model service.
What a scenario varies is the model's answers (a responder), the agent's limits and Slack's pace.

`ModelMeter` wraps a responder to count the requests the model service is working on at once: the
figure "bounded concurrent model calls" is read at the model's side of the wire, not inside nerve.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from pydantic import SecretStr

from adapters.settings import Settings
from adapters.slack.app import SlackBot, build_bot
from adapters.slack.client import make_client
from adapters.slack.serve import serve_http
from bench.slack_bench import SECRET, _Elsewhere, _NoTools
from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from tests.fakes.llm_server import FakeLLMServer, Reply

T = TypeVar("T")
# What the model is asked: the request body in, the answer text and its thinking time out.
Think = Callable[[dict[str, Any]], Awaitable[tuple[str, float]]]


class ModelMeter:
    """A responder that thinks (sleeps) inside itself, so the requests being worked on at once can
    be counted: `peak` is the most at any moment, `requests` all of them."""

    def __init__(self, think: Think) -> None:
        self._think = think
        self.busy = 0
        self.peak = 0
        self.requests = 0

    async def __call__(self, body: dict[str, Any]) -> Reply:
        self.busy += 1
        self.requests += 1
        self.peak = max(self.peak, self.busy)
        try:
            text, seconds = await self._think(body)
            await asyncio.sleep(seconds)
        finally:
            self.busy -= 1
        return Reply(content=text)


@dataclass
class LoadRig:
    slack: Any  # FakeSlack, living on `remote`'s loop
    llm: FakeLLMServer
    bot: SlackBot
    agent: Agent
    url: str
    remote: _Elsewhere

    async def elsewhere(self, work: Callable[[aiohttp.ClientSession], Coroutine[Any, Any, T]]) -> T:
        """Run `work` (the load generator) on the other loop with an HTTP session of its own."""

        async def with_session() -> T:
            async with aiohttp.ClientSession() as http:
                return await work(http)

        return await self.remote.run(with_session())


@contextlib.asynccontextmanager
async def slack_load_rig(
    folder: Path,
    responder: ModelMeter,
    *,
    config: AgentConfig,
    pace: float = 1.0,
    status_interval: float = 1.0,
) -> AsyncIterator[LoadRig]:
    """Fake Slack and the model service on another loop; nerve's Slack adapter served on this one.
    `pace` is nerve's own pace of posts per channel (Slack's: about one a second)."""
    from tests.fakes.slack_api import FakeSlack

    remote = _Elsewhere()
    slack, llm = FakeSlack(), FakeLLMServer(responder, strict=False)
    await remote.run(slack.__aenter__())
    await remote.run(llm.__aenter__())
    try:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            slack_bot_token=SecretStr("xoxb-bench"),
            slack_app_token=None,
            slack_signing_secret=SecretStr(SECRET),
            slack_api_base_url=slack.api_url,
        )
        store = await SQLiteStore.open(folder / "nerve.db")
        model = OpenAILLM(model="bench", base_url=llm.base_url, api_key=None, timeout=60, max_retries=0)
        agent = Agent(llm=model, host=_NoTools(), store=store, inbox=store, config=config)
        session = aiohttp.ClientSession()
        bot = build_bot(
            agent,
            settings,
            client=make_client(settings, session=session),
            pace=pace,
            status_interval=status_interval,
        )
        runner, url = await serve_http(bot, "127.0.0.1", 0)
        try:
            yield LoadRig(slack=slack, llm=llm, bot=bot, agent=agent, url=url, remote=remote)
            await bot.idle()
        finally:
            await bot.aclose()
            await runner.cleanup()
            await session.close()
            await model.aclose()
            await store.close()
    finally:
        await remote.run(llm.__aexit__(None, None, None))
        await remote.run(slack.__aexit__(None, None, None))
        remote.close()


def quantile(values: list[float], q: int) -> float:
    """The q-th percentile (1–99); the value itself when there is one."""
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]

"""Live answers on Slack: how soon the first words show, and what one answer costs in Slack calls.

One mention goes through the real parts on 127.0.0.1: a signed Events API delivery into bolt, the
real agent and SQLite store, the `openai` client against a local model service that streams (first
token after 800 ms, then 40 tokens 20 ms apart), and the fake Slack Web API (with streaming messages,
or without them: `streaming=False`). The model's first token is timed where nerve receives it.

Goal (issue "Live answers"): first visible text within 150 ms of the model's first token, at most
12 Slack calls for the answer, exactly one final message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from adapters.settings import Settings
from adapters.slack.app import SlackBot, build_bot
from adapters.slack.client import make_client
from adapters.slack.serve import serve_http
from bot.agent import Agent, AgentConfig
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.types import CallContext, ChatMessage, Completion, Progress, ToolResult, ToolSpec, TurnEvent
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.test_slack_harness import SIGNING_SECRET, mention, sign

FIRST_TOKEN_DELAY = 0.8
TOKENS = 40
TOKEN_DELAY = 0.02
CHANNEL = "C0BENCH"
THREAD = "1600000000.900001"
_TEXT_METHODS = (
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.postMessage",
    "chat.update",
)


class _NoTools:
    def list_tools(self) -> list[ToolSpec]:
        return []

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        return ToolResult(content="no tools", is_error=True, error_kind="unknown_tool")

    def starting(self) -> list[str]:
        return []


class _TimedLLM:
    """The real client, noting when the first words of the answer reached nerve."""

    def __init__(self, inner: OpenAILLM) -> None:
        self._inner = inner
        self.first_token: float | None = None

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        async def timed(event: TurnEvent) -> None:
            if event.kind == "text" and event.message and self.first_token is None:
                self.first_token = time.perf_counter()
            await progress(event)

        return await self._inner.complete(messages, tools, timed)


def _answer() -> str:
    # 40 tokens of 4 characters, one delta each.
    words = ("air ", "is  ", "good", " ok ")
    return "".join(words[i % len(words)] for i in range(TOKENS)).strip() + "."


def _carries_text(method: str, body: dict[str, Any]) -> bool:
    if method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
        chunks = body.get("chunks") or []
        return bool(body.get("markdown_text")) or any(
            c.get("type") == "markdown_text" and c.get("text") for c in chunks if isinstance(c, dict)
        )
    # A posted or edited message shows the answer's words (not the "Thinking…" placeholder).
    return any(b.get("type") == "markdown" for b in body.get("blocks") or [] if isinstance(b, dict))


@contextlib.asynccontextmanager
async def _running(
    folder: Path, streaming: bool
) -> AsyncIterator[tuple[FakeSlack, _TimedLLM, str, SlackBot]]:
    script = [reply(_answer(), chunk_chars=4, first_token_delay=FIRST_TOKEN_DELAY, chunk_delay=TOKEN_DELAY)]
    async with FakeSlack() as slack, FakeLLMServer(script) as llm:
        slack.streaming = streaming
        store = await SQLiteStore.open(folder / "nerve.db")
        model = OpenAILLM(model="bench", base_url=llm.base_url, api_key=None, timeout=30, max_retries=0)
        timed = _TimedLLM(model)
        agent = Agent(llm=timed, host=_NoTools(), store=store, inbox=store, config=AgentConfig())
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            slack_bot_token="xoxb-bench",
            slack_signing_secret=SIGNING_SECRET,
            slack_api_base_url=slack.api_url,
            nerve_http_port=0,
        )
        # Production pacing: one post a second per channel, edits about once a second.
        bot = build_bot(agent, settings, client=make_client(settings))
        runner, url = await serve_http(bot, "127.0.0.1", 0)
        try:
            yield slack, timed, url, bot
        finally:
            await bot.aclose()
            await runner.cleanup()
            await model.aclose()
            await store.close()


async def run(*, streaming: bool = True, within: float = 30.0) -> dict[str, float]:
    """One answer through the real Slack adapter; returns `first_text_ms` (from the model's first
    token to the first call at the fake Slack carrying the answer's words), `slack_calls` (Web API
    calls for the answer, auth.test and refused calls included) and `final_messages` (messages in the
    thread when the turn is done: the goal is 1)."""
    with tempfile.TemporaryDirectory(prefix="nerve-stream-bench-") as tmp:
        async with _running(Path(tmp), streaming) as (slack, timed, url, bot):
            body = mention(f"<@{BOT_USER_ID}> how is the air?", channel=CHANNEL, ts=THREAD)
            raw = json.dumps(body)
            async with (
                aiohttp.ClientSession() as http,
                http.post(url, data=raw, headers=sign(raw)) as response,
            ):
                await response.read()
            async with asyncio.timeout(within):
                await bot.idle()
            shown = [
                c.at
                for c in slack.calls
                if c.ok and c.method in _TEXT_METHODS and _carries_text(c.method, c.body)
            ]
            if timed.first_token is None or not shown:
                raise RuntimeError("the answer never showed: no first token, or no words reached Slack")
            return {
                "first_text_ms": round((shown[0] - timed.first_token) * 1000, 1),
                "slack_calls": float(len([c for c in slack.calls if c.method != "auth.test"])),
                "final_messages": float(len(slack.thread(CHANNEL, THREAD))),
            }


if __name__ == "__main__":
    for mode in (True, False):
        print("streaming" if mode else "edited", asyncio.run(run(streaming=mode)))

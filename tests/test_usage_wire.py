"""Usage as providers send it: cached prompt tokens read from `prompt_tokens_details`, streamed
(asked for with `stream_options.include_usage`) and whole; none at all stays None for the meter to
estimate."""

from __future__ import annotations

import pytest

from bot.model.client import OpenAILLM, StreamMode
from bot.types import ChatMessage, TurnEvent, Usage
from tests.fakes.llm_server import FakeLLMServer, reply

USER = [ChatMessage(role="user", content="What is the air like in 94107?")]


async def _no_progress(event: TurnEvent) -> None:
    return None


@pytest.mark.parametrize("stream", ["on", "off"])
async def test_cached_prompt_tokens_are_read_streamed_and_whole(stream: StreamMode) -> None:
    figures = Usage(prompt_tokens=1200, completion_tokens=40, cached_tokens=1024)
    async with FakeLLMServer([reply("fine", usage=figures), reply("none", usage=None)]) as server:
        llm = OpenAILLM(
            model="m", base_url=server.base_url, api_key=None, timeout=10, max_retries=0, stream=stream
        )
        try:
            counted = await llm.complete(USER, [], _no_progress)
            missing = await llm.complete(USER, [], _no_progress)
        finally:
            await llm.aclose()
        body = server.requests[0]
    assert counted.usage == figures
    assert missing.usage is None
    if stream == "on":
        assert body["stream_options"] == {"include_usage": True}

"""What a person reads when the model service cannot answer: one plain message that says what would
help, never "try again shortly" where trying again will not, and never the same advice twice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from adapters.settings import PLATFORMS
from bot.agent import AgentConfig
from bot.policy.scopes import Place
from bot.types import ConversationKey, Incoming
from tests.fakes.llm_server import context_length_exceeded, rate_limited, server_error
from tests.test_slack_harness import core


def incoming(platform: str, *, dm: bool = False) -> Incoming:
    key = ConversationKey(platform=platform, workspace="W1", channel="D1" if dm else "C1", thread="t1")
    place = Place(platform=platform, channel=key.channel, dm=dm, user="U1")
    return Incoming(key=key, text="what did we say an hour ago?", user_id="U1", place=place)


@pytest.mark.parametrize(
    ("platform", "dm", "how"),
    [
        ("slack", False, "mentioning me in this thread with the word `reset`"),
        ("slack", True, "`/nerve reset`"),
        ("discord", False, "`/reset`"),
        ("terminal", False, "`/reset`"),
    ],
)
async def test_a_conversation_too_long_even_compressed_says_how_to_start_afresh(
    tmp_path: Path, platform: str, dm: bool, how: str
) -> None:
    steps = [context_length_exceeded(), context_length_exceeded(style="vllm")]
    async with core(tmp_path, steps, config=AgentConfig(platforms=PLATFORMS)) as c:
        answer = await c.agent.reply(incoming(platform, dm=dm))
        assert answer.failed
        assert "try again" not in answer.text.lower()
        assert "longer than the model can read" in answer.text
        assert how in answer.text and "ask something shorter" in answer.text
        # Not stored as the model's words: the next message tries the model again.
        history = await c.store.history(incoming(platform, dm=dm).key)
        assert [m.role for m in history] == ["user"]


async def test_a_rate_limit_of_an_hour_is_one_sentence_that_says_when_to_try_again(tmp_path: Path) -> None:
    async with core(tmp_path, [rate_limited("3600")]) as c:
        answer = await c.agent.reply(incoming("slack"))
    assert answer.failed
    assert answer.text == (
        "Sorry — the language model failed: the model service is rate limiting requests (429); "
        "please try again in about 1 hour."
    )


async def test_a_server_error_asking_for_minutes_says_how_many(tmp_path: Path) -> None:
    step = replace(server_error(503), headers={"Retry-After": "290"})
    async with core(tmp_path, [step]) as c:
        answer = await c.agent.reply(incoming("discord"))
    assert answer.text == (
        "Sorry — the language model failed: the model service failed (503); "
        "please try again in about 5 minutes."
    )

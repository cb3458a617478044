"""Whose refusal of images is remembered: the model that refused, not the primary, through the agent's
façade over a chain of two local model services (the real `openai` client); the store on SQLite, or
PostgreSQL for the tests marked to run on both."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.agent import Agent, AgentConfig
from bot.model.chain import ModelChain
from bot.model.client import OpenAILLM
from bot.policy.scopes import Rule, Scopes
from bot.store.base import ConversationStore
from bot.store.files import FileLedger
from tests.fakes.llm_server import FakeLLMServer, Step, image_parts, reply, server_error
from tests.file_samples import image_bytes
from tests.test_files_agent import KEY, NoTools, Shared, said


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def two_models(
    store: ConversationStore,
    primary: Sequence[Step],
    other: Sequence[Step],
    *,
    other_refuses: bool = False,
    **options: Any,
) -> AsyncIterator[tuple[Agent, FakeLLMServer, FakeLLMServer, Clock]]:
    """An agent over `primary` then `other` (a fallback, or a place's own model), each its own service."""
    clock = Clock()
    async with (
        FakeLLMServer(primary, strict=False) as first,
        FakeLLMServer(other, refuse_images=other_refuses, strict=False) as second,
    ):
        clients = [
            OpenAILLM(
                name=name, model=f"{name}-model", base_url=url, api_key=None, timeout=10.0, max_retries=0
            )
            for name, url in (("primary", first.base_url), ("other", second.base_url))
        ]
        chain = ModelChain.of([(c.name, c) for c in clients], cool_down=10, clock=clock)
        config = AgentConfig(model="primary", **options)
        try:
            yield (
                Agent(llm=chain, host=NoTools(), store=store, inbox=store, config=config),
                first,
                second,
                clock,
            )
        finally:
            for client in clients:
                await client.aclose()


def screen(name: str = "screen.png") -> Shared:
    return Shared(name, image_bytes((400, 300), "PNG"), "image/png")


@pytest.mark.both_stores
async def test_a_text_only_fallbacks_refusal_is_its_own_and_the_primary_still_sees(
    store: ConversationStore,
) -> None:
    primary = [server_error(503), reply("I see a login form.")]
    async with two_models(store, primary, [reply("Only its name.")], other_refuses=True) as made:
        agent, first, second, clock = made
        answer = await agent.reply(said("what is on the screen?", screen()))
        assert answer.text.endswith("Only its name.")
        assert len(second.rejected) == 1 and image_parts(second.rejected[0])

        clock.now = 60  # the primary's cool-down is over: it answers again
        later = await agent.reply(said("and this one?", screen("other.png"), event="e2"))

    assert later.text == "I see a login form."
    assert image_parts(first.requests[-1]), "the primary never refused: it is shown images"
    assert isinstance(store, FileLedger)
    assert await store.refuses_images("other") and not await store.refuses_images("primary")


@pytest.mark.both_stores
async def test_a_places_vision_model_is_shown_images_the_primary_refused(store: ConversationStore) -> None:
    assert isinstance(store, FileLedger)
    await store.set_refuses_images("primary")
    scopes = Scopes(rules={KEY.platform: Rule(model="other")})
    async with two_models(store, [], [reply("A login form.")], scopes=scopes) as (agent, first, second, _):
        answer = await agent.reply(said("what is on the screen?", screen()))

    assert answer.text == "A login form."
    assert first.requests == [] and len(second.requests) == 1
    assert image_parts(second.requests[0])

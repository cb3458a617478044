"""Fallback models: the real openai client against two local model services, the primary failing.

The fallback answers when the primary answers 503, times out or refuses the connection; the primary
is then skipped for its cool-down (a hand-moved clock) and probed once after it; a stream cut after
its first words is not asked of another model.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.config import Settings
from bot.errors import LLMUnavailable, StreamCut
from bot.model.chain import ModelChain, clients_of
from bot.model.client import OpenAILLM
from bot.model.models import configured_models
from bot.observe import metrics
from bot.types import ChatMessage, TurnEvent
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeLLMServer, reply, server_error
from tests.ports import unused_port

USER = [ChatMessage(role="user", content="What is the air like in 94107?")]
# A wait far past every give-up: only the client's own timeout may end it.
LONG = 600.0
GIVE_UP = 60.0
COOL_DOWN = 30.0


async def no_wait(seconds: float) -> None:
    return None


class Shown:
    """What the person was shown, as the front ends receive it."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    @property
    def text(self) -> str:
        return "".join(event.message for event in self.events if event.kind == "text")


ChainFactory = Callable[..., ModelChain]


@pytest.fixture
async def make_chain() -> AsyncIterator[ChainFactory]:
    """A chain of clients named `primary` and `fallback`, each to its URL; closed after the test."""
    made: list[OpenAILLM] = []

    def factory(
        primary: str, fallback: str, *, clock: Clock | None = None, timeout: float = 5.0
    ) -> ModelChain:
        clients = [
            OpenAILLM(name=name, model=f"{name}-model", base_url=url, api_key=None, timeout=timeout,
                      max_retries=1, sleep=no_wait)
            for name, url in (("primary", primary), ("fallback", fallback))
        ]  # fmt: skip
        made.extend(clients)
        return ModelChain.of(
            [(client.name, client) for client in clients], cool_down=COOL_DOWN, clock=clock or Clock(0.0)
        )

    yield factory
    for client in made:
        await client.aclose()


def requests_total(model: str, outcome: str) -> float:
    body, _ = metrics.exposition()
    line = f'nerve_model_requests_total{{model="{model}",outcome="{outcome}"}} '
    found = [row for row in body.decode().splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


async def test_a_primary_answering_503_gives_way_to_the_fallback(
    make_chain: ChainFactory, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.reset()
    caplog.set_level(logging.INFO, logger="bot.model.chain")
    async with (
        FakeLLMServer([server_error(503)] * 2) as primary,
        FakeLLMServer([reply("the fallback's answer")]) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url)
        shown = Shown()
        async with asyncio.timeout(GIVE_UP):
            completion = await chain.complete(USER, [], shown)
        assert completion.message.content == "the fallback's answer"
        assert completion.model == "fallback"
        assert shown.text == "the fallback's answer"
        assert {event.kind for event in shown.events} == {"text"}  # no retry notice: the outage is not shown
        assert len(primary.requests) == 2  # the one retry a model with a fallback behind it gets
        assert fallback.requests[0]["model"] == "fallback-model"
        assert fallback.requests[0]["messages"][-1]["content"] == USER[0].content
    assert requests_total("primary", "unavailable") == 2
    assert requests_total("fallback", "ok") == 1
    assert "model fallback answered in place of primary" in caplog.text


async def test_a_primary_that_does_not_answer_in_time_gives_way_to_the_fallback(
    make_chain: ChainFactory,
) -> None:
    async with (
        FakeLLMServer([reply("late", delay=LONG)] * 2, strict=False) as primary,
        FakeLLMServer([reply("on time")]) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url, timeout=0.3)
        async with asyncio.timeout(GIVE_UP):
            completion = await chain.complete(USER, [], Shown())
        assert (completion.message.content, completion.model) == ("on time", "fallback")


async def test_a_primary_refusing_the_connection_gives_way_to_the_fallback(make_chain: ChainFactory) -> None:
    async with FakeLLMServer([reply("from the fallback")]) as fallback:
        chain = make_chain(f"http://127.0.0.1:{unused_port()}/v1", fallback.base_url)
        async with asyncio.timeout(GIVE_UP):
            completion = await chain.complete(USER, [], Shown())
        assert (completion.message.content, completion.model) == ("from the fallback", "fallback")


async def test_a_failed_primary_is_skipped_for_its_cool_down_then_probed_once(
    make_chain: ChainFactory,
) -> None:
    clock = Clock(1000.0)
    async with (
        FakeLLMServer([server_error(503)] * 2 + [reply("the primary is back")]) as primary,
        FakeLLMServer([reply("fallback 1"), reply("fallback 2")]) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url, clock=clock)
        async with asyncio.timeout(GIVE_UP):
            assert (await chain.complete(USER, [], Shown())).model == "fallback"
            clock.now += COOL_DOWN - 1
            # Still cooling down: the primary is not asked at all.
            assert (await chain.complete(USER, [], Shown())).message.content == "fallback 2"
            assert len(primary.requests) == 2
            clock.now += 1
            probed = await chain.complete(USER, [], Shown())
        assert (probed.message.content, probed.model) == ("the primary is back", "primary")
        assert len(primary.requests) == 3 and len(fallback.requests) == 2
        assert chain.links[0].circuit.state == "closed"


async def test_a_probe_that_fails_again_keeps_the_primary_skipped(make_chain: ChainFactory) -> None:
    clock = Clock(0.0)
    async with (
        FakeLLMServer([server_error(500)] * 4) as primary,
        FakeLLMServer([reply("one"), reply("two"), reply("three")]) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url, clock=clock)
        async with asyncio.timeout(GIVE_UP):
            await chain.complete(USER, [], Shown())
            clock.now += COOL_DOWN
            assert (await chain.complete(USER, [], Shown())).message.content == "two"
            assert len(primary.requests) == 4  # the probe and its one retry
            clock.now += COOL_DOWN / 2
            assert (await chain.complete(USER, [], Shown())).message.content == "three"
        assert len(primary.requests) == 4


async def test_a_stream_cut_after_its_first_words_is_not_asked_of_another_model(
    make_chain: ChainFactory,
) -> None:
    async with (
        FakeLLMServer([reply("The air in 94107 is good today.", cut_after=3)]) as primary,
        FakeLLMServer([], strict=False) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url)
        shown = Shown()
        async with asyncio.timeout(GIVE_UP):
            with pytest.raises(StreamCut) as cut:
                await chain.complete(USER, [], shown)
        assert cut.value.partial and shown.text == cut.value.partial
        assert fallback.requests == []
        assert chain.links[0].circuit.state == "closed"


async def test_when_every_model_fails_the_error_names_each(make_chain: ChainFactory) -> None:
    async with (
        FakeLLMServer([server_error(503)] * 4) as primary,
        FakeLLMServer([server_error(502)] * 2) as fallback,
    ):
        chain = make_chain(primary.base_url, fallback.base_url)
        async with asyncio.timeout(GIVE_UP):
            with pytest.raises(LLMUnavailable) as failed:
                await chain.complete(USER, [], Shown())
        assert "(502)" in failed.value.message and "also failed: primary" in failed.value.message
        # Both cooling down: the next request still asks the primary rather than answer nothing.
        async with asyncio.timeout(GIVE_UP):
            with pytest.raises(LLMUnavailable):
                await chain.complete(USER, [], Shown())
        assert (len(primary.requests), len(fallback.requests)) == (4, 2)


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


async def test_models_from_the_setting_send_the_key_named_by_its_variable() -> None:
    async with (
        FakeLLMServer([server_error(503)] * 2) as primary,
        FakeLLMServer([reply("answered with the backup key")]) as fallback,
    ):
        listed = json.dumps(
            [
                {"name": "main", "model": "big", "base_url": primary.base_url, "api_key_env": "MAIN_KEY"},
                {
                    "name": "backup",
                    "model": "small",
                    "base_url": fallback.base_url,
                    "api_key_env": "BACKUP_KEY",
                },
            ]
        )
        env = {"MAIN_KEY": "sk-main-secret", "BACKUP_KEY": "sk-backup-secret"}
        models = configured_models(settings(nerve_models=listed), environ=env)
        assert models is not None and models.names == ("main", "backup")
        clients = clients_of(models, settings(), sleep=no_wait)
        try:
            chain = ModelChain.of([(client.name, client) for client in clients])
            async with asyncio.timeout(GIVE_UP):
                completion = await chain.complete(USER, [], Shown())
        finally:
            for client in clients:
                await client.aclose()
        assert (completion.message.content, completion.model) == ("answered with the backup key", "backup")
        assert primary.request_headers[0]["Authorization"] == "Bearer sk-main-secret"
        assert fallback.request_headers[0]["Authorization"] == "Bearer sk-backup-secret"
        assert fallback.requests[0]["model"] == "small"


async def test_one_model_alone_fails_as_it_always_did_and_is_asked_again_at_once() -> None:
    async with FakeLLMServer([server_error(503)] * 2 + [reply("back")]) as only:
        client = OpenAILLM(
            name="only",
            model="m",
            base_url=only.base_url,
            api_key=None,
            timeout=5.0,
            max_retries=1,
            sleep=no_wait,
        )
        try:
            chain = ModelChain.of([("only", client)], cool_down=COOL_DOWN, clock=Clock(0.0))
            shown = Shown()
            async with asyncio.timeout(GIVE_UP):
                with pytest.raises(LLMUnavailable) as failed:
                    await chain.complete(USER, [], shown)
                assert "also failed" not in failed.value.message
                assert any(event.kind == "retrying" for event in shown.events)  # its retries are told
                # Within the cool-down, but there is no other model to ask.
                assert (await chain.complete(USER, [], Shown())).model == "only"
        finally:
            await client.aclose()

"""The real `openai` client against a local fake model service speaking the chat-completions format."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from bot.config import Settings
from bot.errors import ContextTooLong, LLMError, LLMRateLimited, LLMUnavailable, StreamCut
from bot.model.client import OpenAILLM, StreamMode
from bot.model.retries import BACKOFF_CAP, backoff_delay, retry_after_seconds
from bot.types import ChatMessage, ToolCall, ToolSpec, TurnEvent, Usage
from tests.fakes.llm_server import (
    FakeCall,
    FakeLLMServer,
    HttpError,
    Reply,
    ScriptViolation,
    Step,
    context_length_exceeded,
    rate_limited,
    reply,
    server_error,
    tool_reply,
)
from tests.ports import unused_port

USER = [ChatMessage(role="user", content="What is the air like in 94107?")]
# A wait far past every give-up: a test that depends on it ending fails instead of passing slowly.
LONG = 600.0
# How long a test waits for what should end it before failing: generous, for a busy machine.
GIVE_UP = 60.0

ENV_TOOL = ToolSpec(
    name="get_environment_status",
    description="Current air quality, temperature and alerts for a US area code.",
    parameters={
        "type": "object",
        "properties": {"area_code": {"type": "string", "description": "Five-digit ZIP code"}},
        "required": ["area_code"],
    },
    server="env",
    original_name="get_environment_status",
    timeout=12.0,
    triggers=("air",),
)


class RecordedSleep:
    """Stands in for asyncio.sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class RecordedProgress:
    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)


LLMFactory = Callable[..., OpenAILLM]


@pytest.fixture
async def make_llm() -> AsyncIterator[LLMFactory]:
    """Builds clients with a recorded sleep by default, and closes their connection pools after the test."""
    made: list[OpenAILLM] = []

    def factory(
        base_url: str,
        *,
        sleep: Any = None,
        max_retries: int = 3,
        timeout: float = 5.0,
        api_key: str | None = None,
        temperature: float | None = None,
        stream: StreamMode = "auto",
        stream_stall: float = 30.0,
    ) -> OpenAILLM:
        llm = OpenAILLM(
            model="test-model",
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            temperature=temperature,
            stream=stream,
            stream_stall=stream_stall,
            sleep=sleep if sleep is not None else RecordedSleep(),
        )
        made.append(llm)
        return llm

    yield factory
    for llm in made:
        await llm.aclose()


# ------------------------------------------------------------------------------------------ answers


async def test_a_plain_text_answer_comes_back_as_an_assistant_message_with_usage(
    make_llm: LLMFactory,
) -> None:
    async with FakeLLMServer(
        [reply("Air is good.", usage=Usage(prompt_tokens=21, completion_tokens=4))]
    ) as server:
        completion = await make_llm(server.base_url).complete(USER, [], RecordedProgress())
        server.assert_complete()

    assert completion.message == ChatMessage(role="assistant", content="Air is good.")
    assert completion.usage == Usage(prompt_tokens=21, completion_tokens=4)


async def test_an_answer_without_usage_has_no_usage(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("ok", usage=None)]) as server:
        completion = await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert completion.usage is None
    assert completion.message.content == "ok"


async def test_tool_calls_keep_their_ids_and_their_arguments_unchanged_even_when_malformed(
    make_llm: LLMFactory,
) -> None:
    malformed = '{"area_code": "941'
    odd_spacing = '{ "lat" :37.7,"lng":-122.4 , "radius": 100}'
    script = [
        tool_reply(
            FakeCall(id="call_a", name="get_environment_status", arguments=malformed),
            FakeCall(id="call_b", name="simulate_geolocation", arguments=odd_spacing),
            FakeCall(id="call_c", name="get_environment_status", arguments=""),
        )
    ]
    async with FakeLLMServer(script) as server:
        completion = await make_llm(server.base_url).complete(USER, [ENV_TOOL], RecordedProgress())

    assert completion.message.content is None
    assert completion.message.tool_calls == (
        ToolCall(id="call_a", name="get_environment_status", arguments=malformed),
        ToolCall(id="call_b", name="simulate_geolocation", arguments=odd_spacing),
        ToolCall(id="call_c", name="get_environment_status", arguments=""),
    )


async def test_tool_calls_without_ids_get_ids_that_are_unique_across_answers(make_llm: LLMFactory) -> None:
    calls = (("get_environment_status", '{"area_code": "94107"}'), ("get_environment_status", "{}"))
    script = [Reply(tool_calls=tuple(FakeCall(name=n, arguments=a) for n, a in calls), omit_ids=True)] * 2
    async with FakeLLMServer(script) as server:
        llm = make_llm(server.base_url)
        first = await llm.complete(USER, [ENV_TOOL], RecordedProgress())
        second = await llm.complete(USER, [ENV_TOOL], RecordedProgress())

    ids = [call.id for call in first.message.tool_calls + second.message.tool_calls]
    # The fake names its own ids call_fake_<n>; these were made by the client.
    assert all(i.startswith("call_") and not i.startswith("call_fake_") for i in ids)
    assert len(set(ids)) == 4
    assert [call.arguments for call in first.message.tool_calls] == ['{"area_code": "94107"}', "{}"]


async def test_the_model_sees_the_full_history_in_order_and_the_tools_in_openai_form(
    make_llm: LLMFactory,
) -> None:
    call = ToolCall(id="call_1", name="get_environment_status", arguments='{"area_code": "94107"}')
    history = [
        ChatMessage(role="system", content="You are nerve."),
        ChatMessage(role="user", content="Air in 94107?"),
        ChatMessage(role="assistant", content=None, tool_calls=(call,)),
        ChatMessage(
            role="tool", content='{"aqi": 42}', tool_call_id="call_1", is_error=False, latency_ms=12.5
        ),
        ChatMessage(role="assistant", content="AQI is 42."),
        ChatMessage(role="user", content="And tomorrow?"),
    ]
    async with FakeLLMServer([reply("No forecast tool, sorry.")]) as server:
        await make_llm(server.base_url).complete(history, [ENV_TOOL], RecordedProgress())

    (body,) = server.requests
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are nerve."},
        {"role": "user", "content": "Air in 94107?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_environment_status", "arguments": '{"area_code": "94107"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"aqi": 42}'},
        {"role": "assistant", "content": "AQI is 42."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_environment_status",
                "description": "Current air quality, temperature and alerts for a US area code.",
                "parameters": ENV_TOOL.parameters,
            },
        }
    ]
    assert "tool_choice" not in body
    # Answers stream, with the usage figures asked for in the final chunk.
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "temperature" not in body


async def test_no_tools_means_no_tools_field_and_temperature_is_sent_when_set(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("hi")]) as server:
        await make_llm(server.base_url, temperature=0.2).complete(USER, [], RecordedProgress())
    assert "tools" not in server.requests[0]
    assert server.requests[0]["temperature"] == 0.2


async def test_from_settings_uses_the_configured_endpoint_model_and_key() -> None:
    async with FakeLLMServer([reply("hi")]) as server:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            openai_base_url=server.base_url,
            openai_api_key="sk-test-key",  # type: ignore[arg-type]
            nerve_model="local-llama",
        )
        llm = OpenAILLM.from_settings(settings)
        await llm.complete(USER, [], RecordedProgress())
        await llm.aclose()
    assert server.requests[0]["model"] == "local-llama"
    assert server.request_headers[0]["Authorization"] == "Bearer sk-test-key"
    assert "sk-test-key" not in repr(llm)


async def test_a_server_without_the_v1_prefix_is_served_too(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("hi")]) as server:
        base = server.base_url.removesuffix("/v1")
        completion = await make_llm(base).complete(USER, [], RecordedProgress())
    assert completion.message.content == "hi"


# ------------------------------------------------------------------------------------------ retries


async def test_a_429_with_retry_after_waits_that_long_reports_it_and_then_succeeds(
    make_llm: LLMFactory,
) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    async with FakeLLMServer([rate_limited(retry_after="4"), reply("ok")]) as server:
        completion = await make_llm(server.base_url, sleep=sleep).complete(USER, [], progress)
        server.assert_complete()

    assert completion.message.content == "ok"
    assert sleep.waits == [4.0]
    assert progress.events == [
        TurnEvent(kind="retrying", message="rate limited, retrying in 4 s", retry_in=4.0),
        TurnEvent(kind="text", message="ok"),
    ]
    assert len(server.requests) == 2


async def test_retry_after_ms_is_preferred_over_retry_after(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    step = rate_limited(retry_after="9", headers={"retry-after-ms": "1500"})
    async with FakeLLMServer([step, reply("ok")]) as server:
        await make_llm(server.base_url, sleep=sleep).complete(USER, [], RecordedProgress())
    assert sleep.waits == [1.5]


async def test_retry_after_as_an_http_date_is_honoured(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    async with FakeLLMServer([rate_limited(retry_after=when), reply("ok")]) as server:
        await make_llm(server.base_url, sleep=sleep).complete(USER, [], RecordedProgress())
    (wait,) = sleep.waits
    assert 17.0 <= wait <= 20.5


async def test_a_short_retry_after_is_really_waited_with_the_default_sleep() -> None:
    async with FakeLLMServer([rate_limited(retry_after="1"), reply("ok")]) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=1)
        started = time.monotonic()
        async with asyncio.timeout(GIVE_UP):
            completion = await llm.complete(USER, [], RecordedProgress())
        elapsed = time.monotonic() - started
        await llm.aclose()
    assert completion.message.content == "ok"
    # The second really was waited for. Which wait was asked for is the recorded-sleep tests'
    # business; the ceiling only catches a wait misread by orders of magnitude (1 s taken as ms).
    assert 0.95 <= elapsed < GIVE_UP / 2


async def test_a_500_is_retried_after_a_bounded_backoff_and_reported(make_llm: LLMFactory) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    async with FakeLLMServer([server_error(502), reply("ok")]) as server:
        completion = await make_llm(server.base_url, sleep=sleep).complete(USER, [], progress)
        server.assert_complete()

    assert completion.message.content == "ok"
    (wait,) = sleep.waits
    assert 0.0 <= wait <= 1.0
    event, text = progress.events
    assert text == TurnEvent(kind="text", message="ok")
    assert event.kind == "retrying"
    assert event.retry_in == wait
    assert event.message.startswith("model service error (502), retrying in ")


async def test_persistent_429_raises_rate_limited_after_the_retry_budget(make_llm: LLMFactory) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    async with FakeLLMServer([rate_limited("2")] * 3) as server:
        with pytest.raises(LLMRateLimited, match=r"rate limiting.*after 2 retries"):
            await make_llm(server.base_url, sleep=sleep, max_retries=2).complete(USER, [], progress)
        server.assert_complete()
    assert sleep.waits == [2.0, 2.0]
    assert [e.kind for e in progress.events] == ["retrying", "retrying"]


async def test_persistent_5xx_raises_unavailable_with_exponential_backoff(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([server_error(500)] * 5) as server:
        with pytest.raises(LLMUnavailable, match=r"failed \(500\)"):
            await make_llm(server.base_url, sleep=sleep, max_retries=4).complete(USER, [], RecordedProgress())
        server.assert_complete()
    assert len(sleep.waits) == 4
    for attempt, wait in enumerate(sleep.waits):
        assert 0.0 <= wait <= 2.0**attempt


async def test_no_retry_budget_means_the_first_failure_is_final(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([server_error(503)]) as server:
        with pytest.raises(LLMUnavailable):
            await make_llm(server.base_url, sleep=sleep, max_retries=0).complete(USER, [], RecordedProgress())
    assert sleep.waits == []


async def test_a_retry_after_beyond_a_minute_fails_at_once_with_the_wait_named(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([rate_limited(retry_after="3600")]) as server:
        with pytest.raises(LLMRateLimited, match="3600 s"):
            await make_llm(server.base_url, sleep=sleep).complete(USER, [], RecordedProgress())
    assert sleep.waits == []


async def test_an_exhausted_quota_is_not_retried(make_llm: LLMFactory) -> None:
    step = HttpError(
        status=429,
        message="You exceeded your current quota.",
        type="insufficient_quota",
        code="insufficient_quota",
    )
    async with FakeLLMServer([step]) as server:
        with pytest.raises(LLMError, match="out of quota") as caught:
            await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert not isinstance(caught.value, LLMRateLimited)
    assert len(server.requests) == 1


# ---------------------------------------------------------------------------------------- streaming


def texts(progress: RecordedProgress) -> list[str]:
    return [e.message for e in progress.events if e.kind == "text"]


async def test_text_reaches_progress_piece_by_piece_while_the_model_is_still_writing(
    make_llm: LLMFactory,
) -> None:
    answer = "The air in 94107 is good: AQI 42, no alerts."
    progress = RecordedProgress()
    # The server holds the stream after its third chunk until the first text has been shown.
    async with FakeLLMServer([reply(answer, chunk_chars=6, stall_after=3, stall=30)]) as server:

        async def show(event: TurnEvent) -> None:
            await progress(event)
            server.unstall()

        async with asyncio.timeout(10):
            completion = await make_llm(server.base_url).complete(USER, [], show)

    assert texts(progress) == [answer[i : i + 6] for i in range(0, len(answer), 6)]
    assert completion.message == ChatMessage(role="assistant", content=answer)


async def test_tool_call_fragments_split_mid_string_and_interleaved_assemble_into_the_calls(
    make_llm: LLMFactory,
) -> None:
    calls = (
        FakeCall(id="call_env_1", name="get_environment_status", arguments='{"area_code": "94107"}'),
        FakeCall(id="call_geo_2", name="simulate_geolocation", arguments='{"lat": 31.23, "lng": 121.47}'),
        FakeCall(id="call_env_3", name="get_environment_status", arguments='{"area_code": "say \\"hi\\" ☃"}'),
    )
    script = [
        Reply(tool_calls=calls, fragment_chars=2, usage=Usage(prompt_tokens=50, completion_tokens=30)),
        Reply(tool_calls=calls, fragment_chars=5, interleave=False),
    ]
    progress = RecordedProgress()
    async with FakeLLMServer(script) as server:
        llm = make_llm(server.base_url)
        interleaved = await llm.complete(USER, [ENV_TOOL], progress)
        one_after_another = await llm.complete(USER, [ENV_TOOL], progress)

    assert all(body["stream"] is True for body in server.requests)
    expected = tuple(ToolCall(id=c.id or "", name=c.name, arguments=c.arguments) for c in calls)
    assert interleaved.message.tool_calls == expected
    assert one_after_another.message.tool_calls == expected
    assert interleaved.message.content is None
    assert interleaved.usage == Usage(prompt_tokens=50, completion_tokens=30)
    assert texts(progress) == []


async def test_a_provider_rejecting_stream_options_is_detected_once_and_served_without(
    make_llm: LLMFactory,
) -> None:
    async with FakeLLMServer(
        [reply("one"), reply("two"), reply("three")], reject_stream_options=True
    ) as server:
        llm = make_llm(server.base_url)
        answers = [await llm.complete(USER, [], RecordedProgress()) for _ in range(3)]
        server.assert_complete()

    assert [a.message.content for a in answers] == ["one", "two", "three"]
    assert len(server.rejected) == 1
    assert len(server.requests) == 4
    assert all(body["stream"] is True and "stream_options" not in body for body in server.requests[1:])
    # Without stream_options this provider sends no usage chunk.
    assert answers[0].usage is None


async def test_a_provider_rejecting_streaming_is_served_whole_answers_from_then_on(
    make_llm: LLMFactory,
) -> None:
    progress = RecordedProgress()
    script = [reply("one", usage=Usage(prompt_tokens=5, completion_tokens=1)), reply("two")]
    async with FakeLLMServer(script, reject_stream=True) as server:
        llm = make_llm(server.base_url)
        first = await llm.complete(USER, [], progress)
        second = await llm.complete(USER, [], progress)
        server.assert_complete()

    assert (first.message.content, second.message.content) == ("one", "two")
    assert first.usage == Usage(prompt_tokens=5, completion_tokens=1)
    assert len(server.rejected) == 1
    assert all("stream" not in body and "stream_options" not in body for body in server.requests[1:])
    # A whole answer is still shown, in one piece.
    assert texts(progress) == ["one", "two"]


async def test_streaming_can_be_switched_off_or_forced(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("whole")]) as server:
        completion = await make_llm(server.base_url, stream="off").complete(USER, [], RecordedProgress())
    assert completion.message.content == "whole"
    assert "stream" not in server.requests[0]

    async with FakeLLMServer([reply("never")], reject_stream=True, strict=False) as server:
        with pytest.raises(LLMError, match=r"refused the request \(400\): Streaming is not supported"):
            await make_llm(server.base_url, stream="on").complete(USER, [], RecordedProgress())
    assert len(server.requests) == 1


async def test_from_settings_takes_the_stream_settings() -> None:
    async with FakeLLMServer([reply("hi"), reply("hi")]) as server:
        for mode in ("OFF", None):
            settings = Settings(
                _env_file=None,  # type: ignore[call-arg]
                openai_base_url=server.base_url,
                **({"nerve_llm_stream": mode} if mode else {}),  # type: ignore[arg-type]
            )
            llm = OpenAILLM.from_settings(settings)
            await llm.complete(USER, [], RecordedProgress())
            await llm.aclose()
    assert "stream" not in server.requests[0]
    assert server.requests[1]["stream"] is True
    assert Settings(_env_file=None).nerve_llm_stream == "auto"  # type: ignore[call-arg]
    assert Settings(_env_file=None).nerve_llm_stream_stall == 30.0  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "broken",
    [
        Reply(
            tool_calls=(FakeCall(name="get_environment_status", arguments='{"area_code": "94107"}'),),
            cut_after=4,
        ),
        reply("The air is good.", cut_after=1),
        reply("The air is good.", error_after=1),
    ],
    ids=["cut-inside-a-tool-call", "cut-before-text", "error-event-before-text"],
)
async def test_a_stream_broken_before_any_text_is_retried_like_a_failed_request(
    make_llm: LLMFactory, broken: Reply
) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    async with FakeLLMServer([broken, reply("The air is good.")]) as server:
        completion = await make_llm(server.base_url, sleep=sleep).complete(USER, [ENV_TOOL], progress)
        server.assert_complete()

    assert completion.message == ChatMessage(role="assistant", content="The air is good.")
    assert len(sleep.waits) == 1 and 0.0 <= sleep.waits[0] <= 1.0
    (retrying,) = [e for e in progress.events if e.kind == "retrying"]
    assert retrying.message.startswith("model answer broke off, retrying in ")
    assert "".join(texts(progress)) == "The air is good."


async def test_a_stream_that_keeps_breaking_fails_after_the_retry_budget(make_llm: LLMFactory) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([reply("x", cut_after=1)] * 3) as server:
        with pytest.raises(LLMUnavailable, match=r"answer broke off.*after 2 retries"):
            await make_llm(server.base_url, sleep=sleep, max_retries=2).complete(USER, [], RecordedProgress())
        server.assert_complete()
    assert len(sleep.waits) == 2


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        (reply("The air is good today.", chunk_chars=4, cut_after=3), "the connection dropped"),
        (
            reply("The air is good today.", chunk_chars=4, error_after=3, error_message="overloaded"),
            "the service reported: overloaded",
        ),
    ],
    ids=["connection-cut", "error-event"],
)
async def test_a_stream_broken_after_text_was_shown_raises_stream_cut_with_that_text(
    make_llm: LLMFactory, broken: Reply, why: str
) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    async with FakeLLMServer([broken, reply("never sent")], strict=False) as server:
        with pytest.raises(StreamCut, match=why) as caught:
            await make_llm(server.base_url, sleep=sleep).complete(USER, [], progress)
    assert caught.value.partial == "The air "
    assert texts(progress) == ["The ", "air "]
    assert len(server.requests) == 1 and sleep.waits == []


async def test_a_stalled_stream_is_given_up_after_the_stall_timeout(make_llm: LLMFactory) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    # The streams stall, and the read timeout is, far past the give-up: only the stall timeout ends them.
    stalled_before_text = reply("The air is good.", stall_after=1, stall=LONG)
    stalled_after_text = reply("The air is good.", chunk_chars=4, stall_after=2, stall=LONG)
    async with FakeLLMServer([stalled_before_text, reply("ok"), stalled_after_text]) as server:
        llm = make_llm(server.base_url, sleep=sleep, timeout=LONG, stream_stall=0.2)
        started = time.monotonic()
        async with asyncio.timeout(GIVE_UP):
            retried = await llm.complete(USER, [], progress)
            with pytest.raises(StreamCut, match=r"nothing came for 0\.2 s") as caught:
                await llm.complete(USER, [], progress)
        elapsed = time.monotonic() - started
        server.assert_complete()

    assert retried.message.content == "ok"
    assert caught.value.partial == "The "
    assert len(sleep.waits) == 1
    assert 0.4 <= elapsed < GIVE_UP


async def test_a_stream_that_ends_without_a_finish_reason_counts_as_broken_off(
    make_llm: LLMFactory,
) -> None:
    # Cut exactly before the chunk that carries finish_reason: every piece of text has arrived.
    async with FakeLLMServer([reply("Done.", chunk_chars=10, cut_after=2)]) as server:
        with pytest.raises(StreamCut) as caught:
            await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert caught.value.partial == "Done."


async def test_a_stream_cut_after_its_finish_reason_keeps_the_whole_answer(make_llm: LLMFactory) -> None:
    # Chunks: role, text, finish_reason, usage; the connection drops before the usage chunk.
    async with FakeLLMServer([reply("Done.", chunk_chars=10, cut_after=3)]) as server:
        completion = await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert completion.message == ChatMessage(role="assistant", content="Done.")
    assert completion.usage is None
    assert len(server.requests) == 1


async def test_a_context_overflow_reported_inside_the_stream_raises_context_too_long(
    make_llm: LLMFactory,
) -> None:
    message = "This model's maximum context length is 4096 tokens. Please reduce the length of the messages."
    async with FakeLLMServer([reply("never", error_after=1, error_message=message)]) as server:
        with pytest.raises(ContextTooLong):
            await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert len(server.requests) == 1


async def test_a_server_that_ignores_stream_and_answers_whole_is_read_as_it_is(make_llm: LLMFactory) -> None:
    whole = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    step = HttpError(status=200, raw_body=json.dumps(whole), headers={"Content-Type": "application/json"})
    async with FakeLLMServer([step]) as server:
        completion = await make_llm(server.base_url).complete(USER, [], RecordedProgress())
    assert completion.message == ChatMessage(role="assistant", content="whole")
    assert completion.usage == Usage(prompt_tokens=3, completion_tokens=1)


# ------------------------------------------------------------------------------------ final errors


@pytest.mark.parametrize(
    "step",
    [
        context_length_exceeded(style="openai"),
        context_length_exceeded(style="vllm"),
        HttpError(status=400, raw_body='{"error": "input length exceeds maximum context length"}'),  # Ollama
        HttpError(
            status=400,
            message="the request exceeds the available context size, try increasing it",
            type="exceed_context_size_error",
        ),  # llama.cpp
        HttpError(status=500, message="Prompt is too long for this model"),
        HttpError(status=413, raw_body="Request Entity Too Large"),
    ],
    ids=["openai-code", "vllm", "ollama", "llama.cpp", "prompt-too-long-500", "http-413"],
)
async def test_a_context_overflow_raises_context_too_long_without_retrying(
    make_llm: LLMFactory, step: Step
) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([step]) as server:
        with pytest.raises(ContextTooLong):
            await make_llm(server.base_url, sleep=sleep).complete(USER, [], RecordedProgress())
    assert len(server.requests) == 1
    assert sleep.waits == []


async def test_another_400_raises_llm_error_with_the_servers_message_and_no_retry(
    make_llm: LLMFactory,
) -> None:
    step = HttpError(
        status=400,
        message="Invalid schema for function 'x': 'object' is required.",
        type="invalid_request_error",
    )
    async with FakeLLMServer([step]) as server:
        with pytest.raises(
            LLMError, match=r"refused the request \(400\): Invalid schema for function"
        ) as caught:
            await make_llm(server.base_url).complete(USER, [ENV_TOOL], RecordedProgress())
    assert type(caught.value) is LLMError
    assert len(server.requests) == 1


async def test_a_rejected_key_is_reported_without_ever_showing_the_key(
    make_llm: LLMFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-very-secret-123"
    step = HttpError(
        status=401,
        # OpenAI quotes the start and end of the key it was given.
        message="Incorrect API key provided: sk-very-****-123.",
        type="invalid_request_error",
        code="invalid_api_key",
    )
    caplog.set_level(logging.DEBUG)
    async with FakeLLMServer([server_error(500), step]) as server:
        llm = make_llm(server.base_url, api_key=secret)
        with pytest.raises(LLMError, match="OPENAI_API_KEY") as caught:
            await llm.complete(USER, [], RecordedProgress())
    assert server.request_headers[0]["Authorization"] == f"Bearer {secret}"
    assert secret not in str(caught.value)
    assert "sk-very" not in str(caught.value) and "-123" not in str(caught.value), "not even a piece"
    assert secret not in repr(llm)
    assert all(secret not in record.getMessage() for record in caplog.records)


async def test_an_unknown_model_names_the_settings_to_check(make_llm: LLMFactory) -> None:
    step = HttpError(
        status=404,
        message="The model `nope` does not exist.",
        type="invalid_request_error",
        code="model_not_found",
    )
    async with FakeLLMServer([step]) as server:
        with pytest.raises(LLMError, match="NERVE_MODEL"):
            await make_llm(server.base_url).complete(USER, [], RecordedProgress())


@pytest.mark.parametrize("status", [400, 403, 404, 405, 422, 501])
async def test_a_status_that_retrying_cannot_fix_fails_at_once_with_the_providers_message(
    make_llm: LLMFactory, status: int
) -> None:
    sleep = RecordedSleep()
    step = HttpError(status=status, message=f"the provider says no ({status})", type="invalid_request_error")
    async with FakeLLMServer([step] * 5, strict=False) as server:
        with pytest.raises(LLMError, match=rf"the provider says no \({status}\)") as caught:
            await make_llm(server.base_url, sleep=sleep, max_retries=4).complete(USER, [], RecordedProgress())
    assert len(server.requests) == 1, f"{status} was sent {len(server.requests)} times"
    assert sleep.waits == []
    assert "retries" not in caught.value.message


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
async def test_only_timeouts_conflicts_rate_limits_and_server_failures_are_retried(
    make_llm: LLMFactory, status: int
) -> None:
    sleep = RecordedSleep()
    async with FakeLLMServer([HttpError(status=status, message="busy"), reply("ok")]) as server:
        completion = await make_llm(server.base_url, sleep=sleep).complete(USER, [], RecordedProgress())
        server.assert_complete()
    assert completion.message.content == "ok"
    assert len(server.requests) == 2 and len(sleep.waits) == 1


async def test_connection_refused_is_retried_once_then_raises_unavailable(make_llm: LLMFactory) -> None:
    sleep, progress = RecordedSleep(), RecordedProgress()
    url = f"http://127.0.0.1:{unused_port()}/v1"
    with pytest.raises(LLMUnavailable, match=r"could not reach the model service at http://127\.0\.0\.1"):
        await make_llm(url, sleep=sleep, max_retries=4).complete(USER, [], progress)
    assert len(sleep.waits) == 1
    assert all(e.message.startswith("model service unreachable, retrying in") for e in progress.events)


async def test_a_model_slower_than_the_timeout_raises_unavailable_after_the_retries(
    make_llm: LLMFactory,
) -> None:
    sleep = RecordedSleep()
    # The answers come far past the give-up: only the client's timeout can end the call.
    async with FakeLLMServer([reply("late", delay=LONG)] * 2) as server:
        llm = make_llm(server.base_url, sleep=sleep, max_retries=1, timeout=0.3)
        started = time.monotonic()
        async with asyncio.timeout(GIVE_UP):
            with pytest.raises(LLMUnavailable, match=r"did not answer within 0\.3 s"):
                await llm.complete(USER, [], RecordedProgress())
        elapsed = time.monotonic() - started
        server.assert_complete()
    assert len(sleep.waits) == 1
    assert 0.5 <= elapsed < GIVE_UP


# -------------------------------------------------------------------------------- the fake itself


async def test_the_fake_server_fails_loudly_when_called_past_its_script(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("only one")], strict=False) as server:
        llm = make_llm(server.base_url, max_retries=0)
        await llm.complete(USER, [], RecordedProgress())
        with pytest.raises(LLMUnavailable, match="after the script ended"):
            await llm.complete(USER, [], RecordedProgress())
    assert len(server.violations) == 1
    with pytest.raises(ScriptViolation, match="after the script ended"):
        server.assert_no_violations()


async def test_leaving_a_strict_fake_server_with_violations_fails_the_test(make_llm: LLMFactory) -> None:
    with pytest.raises(ScriptViolation, match="after the script ended"):
        async with FakeLLMServer([]) as server:
            with pytest.raises(LLMUnavailable):
                await make_llm(server.base_url, max_retries=0).complete(USER, [], RecordedProgress())


async def test_assert_complete_fails_when_scripted_steps_were_never_requested(make_llm: LLMFactory) -> None:
    async with FakeLLMServer([reply("one"), reply("two")]) as server:
        await make_llm(server.base_url).complete(USER, [], RecordedProgress())
        with pytest.raises(ScriptViolation, match="1 scripted step"):
            server.assert_complete()


async def test_the_fake_server_streams_server_sent_events_with_usage_only_when_asked() -> None:
    async def stream(server: FakeLLMServer, **extra: Any) -> list[str]:
        payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, **extra}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{server.base_url}/chat/completions", json=payload) as resp,
        ):
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            body = (await resp.read()).decode()
        return [line.removeprefix("data: ") for line in body.split("\n\n") if line]

    async with FakeLLMServer([reply("Hello there"), reply("Hello there")]) as server:
        with_usage = await stream(server, stream_options={"include_usage": True})
        without = await stream(server)

    assert with_usage[-1] == "[DONE]" and without[-1] == "[DONE]"
    chunks = [json.loads(line) for line in with_usage[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello there"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all("usage" not in json.loads(line) for line in without[:-1])


async def test_the_fake_server_can_refuse_streaming_like_some_providers() -> None:
    async with FakeLLMServer([reply("never")], reject_stream=True) as server:
        payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{server.base_url}/chat/completions", json=payload) as resp,
        ):
            status, body = resp.status, await resp.json()
    assert status == 400
    assert "Streaming is not supported" in body["error"]["message"]
    assert len(server.rejected) == 1 and server.remaining == 1


async def test_a_responder_serves_many_conversations_at_once(make_llm: LLMFactory) -> None:
    def responder(request: dict[str, Any]) -> Step:
        last = request["messages"][-1]
        if last["role"] == "user":
            area = last["content"].split()[-1]
            return tool_reply(("get_environment_status", json.dumps({"area_code": area})))
        return reply(f"Result: {last['content']}")

    async def conversation(llm: OpenAILLM, area: str) -> str:
        history = [ChatMessage(role="user", content=f"air in {area}")]
        first = await llm.complete(history, [ENV_TOOL], RecordedProgress())
        (call,) = first.message.tool_calls
        history += [
            first.message,
            ChatMessage(
                role="tool",
                tool_call_id=call.id,
                content=f"aqi for {json.loads(call.arguments)['area_code']}",
            ),
        ]
        second = await llm.complete(history, [ENV_TOOL], RecordedProgress())
        return second.message.content or ""

    areas = [f"9{n:04d}" for n in range(20)]
    async with FakeLLMServer(responder) as server:
        llm = make_llm(server.base_url)
        async with asyncio.timeout(10):
            answers = await asyncio.gather(*(conversation(llm, a) for a in areas))
        server.assert_complete()
    assert answers == [f"Result: aqi for {a}" for a in areas]
    assert len(server.requests) == 40


# ------------------------------------------------------------------------------------ pure helpers


def test_backoff_is_full_jitter_bounded_by_the_cap() -> None:
    for attempt in range(12):
        for _ in range(50):
            assert 0.0 <= backoff_delay(attempt) <= min(BACKOFF_CAP, 2.0**attempt)
    assert max(backoff_delay(10) for _ in range(200)) > 15  # it does grow towards the cap


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert (
        retry_after_seconds({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    )
    assert retry_after_seconds({"retry-after": "-5"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


async def test_credentials_in_the_base_url_never_appear_in_errors(make_llm: LLMFactory) -> None:
    url = f"http://admin:hunter2@127.0.0.1:{unused_port()}/v1"
    llm = make_llm(url, max_retries=0)
    with pytest.raises(LLMUnavailable) as caught:
        await llm.complete(USER, [], RecordedProgress())
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(llm)


async def test_a_web_page_instead_of_the_api_is_a_plain_error(make_llm: LLMFactory) -> None:
    page = HttpError(status=200, raw_body="<html>welcome</html>", headers={"Content-Type": "text/html"})
    async with FakeLLMServer([page]) as server:
        with pytest.raises(LLMError, match="did not answer with a chat completion"):
            await make_llm(server.base_url).complete(USER, [], RecordedProgress())

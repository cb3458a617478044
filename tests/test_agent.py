"""The agent loop, driven by a scripted model against real MCP servers and a real SQLite store."""

from __future__ import annotations

import asyncio
import json

from bot.agent import Agent, AgentConfig
from bot.errors import ContextTooLong, LLMUnavailable
from bot.mcp.host import MCPHost
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from bot.text.turn_note import split_note
from bot.types import ChatMessage, ConversationKey, Incoming, TurnEvent
from tests.fakes.llm_server import FakeLLMServer, reply, tool_reply
from tests.fakes.scripted import Call, ScriptedLLM, Step

KEY = ConversationKey(platform="test", workspace="w", channel="c", thread="t")


def incoming(text: str, key: ConversationKey = KEY, event_id: str | None = None) -> Incoming:
    return Incoming(key=key, text=text, user_id="u1", event_id=event_id)


def make_agent(llm: ScriptedLLM, host: MCPHost, store: SQLiteStore, **config: object) -> Agent:
    return Agent(llm=llm, host=host, store=store, inbox=store, config=AgentConfig(**config))  # type: ignore[arg-type]


def tool_messages(request: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in request if m.role == "tool"]


def result_json(message: ChatMessage) -> object:
    """The JSON after the certainty anchor line of a tool message."""
    anchor, _, body = (message.content or "").partition("\n")
    assert anchor.startswith('Tool "'), anchor
    return json.loads(body)


async def test_two_tool_calls_run_in_parallel_and_keep_their_ids(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(
                calls=[
                    Call("wait_and_echo", {"label": "slow", "delay_ms": 400}, id="call_slow"),
                    Call("wait_and_echo", {"label": "fast", "delay_ms": 0}, id="call_fast"),
                ]
            ),
            Step(text="done"),
        ]
    )
    events: list[TurnEvent] = []

    async def progress(event: TurnEvent) -> None:
        events.append(event)

    reply = await make_agent(llm, loop_host, store).reply(incoming("echo both"), progress)

    assert reply.text == "done"
    finished = [e.tool_call_id for e in events if e.kind == "tool_finished"]
    assert finished == ["call_fast", "call_slow"], "the fast call must finish while the slow one runs"
    request = llm.last_request()
    assistant = next(m for m in request if m.role == "assistant")
    assert [c.id for c in assistant.tool_calls] == ["call_slow", "call_fast"]
    assert request.index(assistant) < request.index(tool_messages(request)[0])
    by_id = {m.tool_call_id: result_json(m) for m in tool_messages(request)}
    assert by_id["call_slow"] == {"label": "slow", "delay_ms": 400}
    assert by_id["call_fast"] == {"label": "fast", "delay_ms": 0}
    assert [m.tool_call_id for m in tool_messages(request)] == ["call_slow", "call_fast"]
    assert tool_messages(request)[0].content.startswith('Tool "wait_and_echo" ran successfully.')
    assert [a.tool_call_id for a in reply.attachments] == ["call_slow", "call_fast"]
    llm.assert_complete()


async def test_every_round_carries_the_whole_history(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("wait_and_echo", {"label": "first"})]),
            Step(text="first answer"),
            Step(text="second answer"),
        ]
    )
    agent = make_agent(llm, loop_host, store)
    await agent.reply(incoming("one"))
    await agent.reply(incoming("two"))

    roles = [(m.role, m.content if m.role != "tool" else "tool") for m in llm.last_request()[1:]]
    assert roles == [
        ("user", "one"),
        ("assistant", None),
        ("tool", "tool"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]
    assert llm.last_request()[0].role == "system"


async def test_invalid_json_arguments_are_never_dispatched(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("simulate_geolocation", '{"lat": 31.2, "lng": ', id="bad")]),
            Step(text="gave up"),
        ]
    )
    events: list[TurnEvent] = []

    async def progress(event: TurnEvent) -> None:
        events.append(event)

    reply = await make_agent(llm, loop_host, store).reply(incoming("where am I"), progress)

    assert not [e for e in events if e.kind == "tool_started"], "nothing may reach the server"
    (message,) = tool_messages(llm.last_request())
    assert message.tool_call_id == "bad"
    error = result_json(message)
    assert isinstance(error, dict) and "not valid JSON" in error["error"]
    assert reply.attachments[0].is_error


async def test_string_numbers_are_coerced_before_the_call(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("simulate_geolocation", {"lat": "31.23", "lng": "121.47", "radius": "500"})]),
            Step(text="ok"),
        ]
    )
    reply = await make_agent(llm, loop_host, store).reply(incoming("near 31.23, 121.47"))

    (attachment,) = reply.attachments
    assert not attachment.is_error, attachment.content
    assert attachment.arguments == {"lat": 31.23, "lng": 121.47, "radius": 500}


async def test_out_of_bounds_arguments_go_back_to_the_model_to_fix(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("simulate_geolocation", {"lat": 999, "lng": 121.47})]),
            Step(calls=[Call("simulate_geolocation", {"lat": 31.23, "lng": 121.47})]),
            Step(text="fixed"),
        ]
    )
    reply = await make_agent(llm, loop_host, store).reply(incoming("near me"))

    first, second = tool_messages(llm.last_request())
    assert "maximum" in json.dumps(result_json(first))
    assert not second.is_error
    assert reply.text == "fixed"
    llm.assert_complete()


async def test_unknown_tool_name_comes_back_with_the_real_names(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("get_weather", {"city": "x"})]), Step(text="sorry")])
    await make_agent(llm, loop_host, store).reply(incoming("weather?"))

    (message,) = tool_messages(llm.last_request())
    error = json.dumps(result_json(message))
    assert "get_weather" in error and "get_environment_status" in error and "simulate_geolocation" in error


async def test_a_failing_tool_is_not_retried_blindly(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("broken", {})]),
            Step(calls=[Call("broken", {"reason": "try again"})]),
        ]
    )
    reply = await make_agent(llm, loop_host, store).reply(incoming("use the broken tool"))

    assert "broken failed: backend error: the backend is down" in reply.text
    assert len(reply.attachments) == 2 and all(a.is_error for a in reply.attachments)
    llm.assert_complete()


async def test_the_model_may_answer_without_a_failed_tool_and_the_user_is_told(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("broken", {})]), Step(text="I can answer from memory.")])
    reply = await make_agent(llm, loop_host, store).reply(incoming("use the broken tool"))

    assert reply.text.startswith("I can answer from memory.")
    assert "broken failed: backend error: the backend is down" in reply.text


async def test_a_rate_limited_tool_is_retried_once_after_its_delay(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("flaky_rate_limit", {})]), Step(text="ok")])
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    agent = Agent(llm=llm, host=loop_host, store=store, inbox=store, sleep=sleep)
    reply = await agent.reply(incoming("flaky"))

    assert waits == [0.05]
    (attachment,) = reply.attachments
    assert not attachment.is_error and "second try" in attachment.content


async def test_the_same_call_is_refused_after_three_times(loop_host, store):
    same = Call("wait_and_echo", {"label": "again"})
    llm = ScriptedLLM(
        [Step(calls=[same]), Step(calls=[same]), Step(calls=[same]), Step(calls=[same]), Step(text="ok")]
    )
    reply = await make_agent(llm, loop_host, store).reply(incoming("loop"))

    results = [a.is_error for a in reply.attachments]
    assert results == [False, False, False, True]
    assert "already called 3 times" in reply.attachments[-1].content


async def test_rounds_are_bounded_and_the_answer_says_it_was_cut_short(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("wait_and_echo", {"label": str(i)})]) for i in range(3)])
    reply = await make_agent(llm, loop_host, store, max_rounds=3).reply(incoming("go on forever"))

    assert reply.cut_short and "cut short" in reply.text
    assert len(reply.attachments) == 3
    llm.assert_complete()


async def test_an_answer_without_tools_to_a_trigger_question_is_confirmed_once(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(text="The air is great!"),
            Step(calls=[Call("get_environment_status", {"area_code": "A1001"})]),
            Step(text="AQI from the tool"),
        ]
    )
    reply = await make_agent(llm, loop_host, store).reply(incoming("How is the air in A1001?"))

    nudged = llm.requests[1]
    assert nudged[-2].content == "The air is great!" and "Are you sure no tool is needed" in (
        nudged[-1].content or ""
    )
    assert reply.text == "AQI from the tool"
    stored = await store.history(KEY)
    assert all("Are you sure" not in (m.content or "") for m in stored), "the nudge is not persisted"
    assert "The air is great!" not in [m.content for m in stored]


async def test_chit_chat_is_never_nudged(loop_host, store):
    llm = ScriptedLLM([Step(text="Hi there!")])
    reply = await make_agent(llm, loop_host, store).reply(incoming("hello"))
    assert reply.text == "Hi there!"
    llm.assert_complete()


async def test_the_nudge_fires_at_most_once_per_turn(loop_host, store):
    llm = ScriptedLLM([Step(text="Sunny."), Step(text="Still sunny, no tool needed.")])
    reply = await make_agent(llm, loop_host, store).reply(incoming("what's the weather in A1001"))
    assert reply.text == "Still sunny, no tool needed."
    llm.assert_complete()


async def test_a_context_length_error_compresses_and_retries_once(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(text="first"),
            Step(text="second"),
            Step(error=ContextTooLong("maximum context length exceeded")),
            Step(text="third, after compression"),
        ]
    )
    agent = make_agent(llm, loop_host, store)
    await agent.reply(incoming("one"))
    await agent.reply(incoming("two"))
    reply = await agent.reply(incoming("three"))

    assert reply.text == "third, after compression"
    squeezed = llm.last_request()
    assert [m.role for m in squeezed] == ["system", "user"]
    assert "Summary of the earlier conversation" in (squeezed[1].content or "")
    assert "one" in (squeezed[1].content or "") and split_note(squeezed[1].content or "")[0] == "three"


async def test_the_user_message_is_kept_when_the_model_fails(loop_host, store):
    llm = ScriptedLLM([Step(error=LLMUnavailable("connection refused"))])
    reply = await make_agent(llm, loop_host, store).reply(incoming("are you there?"))

    assert "the language model failed: connection refused" in reply.text and reply.failed
    history = await store.history(KEY)
    assert [(m.role, m.content) for m in history] == [("user", "are you there?")], "the apology is not stored"


async def test_a_redelivered_message_whose_model_call_failed_is_tried_again(loop_host, store):
    llm = ScriptedLLM([Step(error=LLMUnavailable("connection refused")), Step(text="back again")])
    agent = make_agent(llm, loop_host, store)
    assert (await agent.reply(incoming("hello?", event_id="Ev9"))).failed
    reply = await agent.reply(incoming("hello?", event_id="Ev9"))
    assert reply.text == "back again" and not reply.failed


async def test_repeated_call_ids_from_the_model_are_made_unique(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("wait_and_echo", {"label": "a"}, id="call_0")]),
            Step(calls=[Call("wait_and_echo", {"label": "b"}, id="call_0")]),
            Step(text="done"),
        ]
    )
    await make_agent(llm, loop_host, store).reply(incoming("twice"))

    request = llm.last_request()
    call_ids = [c.id for m in request for c in m.tool_calls]
    assert len(set(call_ids)) == 2 and call_ids[0] == "call_0"
    assert [m.tool_call_id for m in tool_messages(request)] == call_ids


async def test_more_calls_in_one_message_than_allowed_are_refused_not_run(loop_host, store):
    many = [Call("wait_and_echo", {"label": str(i)}) for i in range(20)]
    llm = ScriptedLLM([Step(calls=many), Step(text="ok")])
    reply = await make_agent(llm, loop_host, store).reply(incoming("fan out"))

    errors = [a.is_error for a in reply.attachments]
    assert errors == [False] * 16 + [True] * 4
    assert "At most 16 tool calls" in reply.attachments[-1].content


async def test_messages_to_one_thread_are_answered_in_arrival_order(loop_host, store):
    llm = ScriptedLLM(
        [
            Step(calls=[Call("wait_and_echo", {"label": "slow", "delay_ms": 200})]),
            Step(text="answer one"),
            Step(text="answer two"),
        ]
    )
    agent = make_agent(llm, loop_host, store)
    first = asyncio.create_task(agent.reply(incoming("one")))
    await asyncio.sleep(0)
    second = asyncio.create_task(agent.reply(incoming("two")))
    replies = await asyncio.wait_for(asyncio.gather(first, second), 20)

    assert [r.text for r in replies] == ["answer one", "answer two"]
    contents = [m.content for m in await store.history(KEY) if m.role != "tool"]
    assert contents == ["one", None, "answer one", "two", "answer two"]


async def test_a_redelivered_event_gets_the_stored_answer_without_a_second_turn(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("wait_and_echo", {"label": "x"})]), Step(text="the answer")])
    agent = make_agent(llm, loop_host, store)
    first = await agent.reply(incoming("question", event_id="Ev1"))
    again = await agent.reply(incoming("question", event_id="Ev1"))

    assert again.text == first.text == "the answer"
    assert [a.name for a in again.attachments] == ["wait_and_echo"]
    assert len(llm.requests) == 2
    assert [m.content for m in await store.history(KEY)].count("question") == 1


async def test_a_redelivered_event_whose_turn_was_cut_off_is_finished(loop_host, store):
    await store.append(KEY, [ChatMessage(role="user", content="question")], event_id="Ev2")
    llm = ScriptedLLM([Step(text="finished now")])
    reply = await make_agent(llm, loop_host, store).reply(incoming("question", event_id="Ev2"))

    assert reply.text == "finished now"
    assert [m.content for m in llm.last_request()[1:]] == ["question"]


async def test_a_cut_off_turn_answered_with_the_next_message_is_not_answered_again(loop_host, store):
    """A stop cut off the turn of "one" after its message was stored; "two" was answered next, the
    model sent both together: "one" handed on (delivered again) gets that answer, no second one."""
    await store.append(KEY, [ChatMessage(role="user", content="one")], event_id="Ev1")
    llm = ScriptedLLM([Step(text="both answered")])
    agent = make_agent(llm, loop_host, store)
    assert (await agent.reply(incoming("two", event_id="Ev2"))).text == "both answered"
    again = await agent.reply(incoming("one", event_id="Ev1"))

    assert again.text == "both answered" and not again.failed
    assert len(llm.requests) == 1
    assert [m.content for m in await store.history(KEY)] == ["one", "two", "both answered"]


async def test_a_huge_result_is_cut_for_the_model_but_kept_whole(loop_host, store):
    llm = ScriptedLLM([Step(calls=[Call("big", {"items": 3000})]), Step(text="summarised")])
    reply = await make_agent(llm, loop_host, store, context_tokens=8000).reply(incoming("big data"))

    (sent,) = tool_messages(llm.last_request())
    seen = result_json(sent)
    assert isinstance(seen, dict) and "cut to its key fields" in seen["_note"]
    assert len(sent.content or "") < 8000
    stored = next(m for m in await store.history(KEY) if m.role == "tool")
    assert len(json.loads(stored.content or "")["records"]) == 3000
    assert reply.attachments[0].truncated and len(reply.attachments[0].content) <= 20_001


async def test_only_the_last_of_repeated_results_of_one_tool_is_sent(loop_host, store):
    steps = []
    for label in ("a", "b", "c"):
        steps += [Step(calls=[Call("wait_and_echo", {"label": label})]), Step(text=f"answer {label}")]
    llm = ScriptedLLM(steps)
    agent = make_agent(llm, loop_host, store)
    for label in ("a", "b", "c"):
        await agent.reply(incoming(f"echo {label}"))

    results = [result_json(m) for m in tool_messages(llm.last_request())]
    assert results[-1] == {"label": "c", "delay_ms": 0}
    assert all("superseded" in json.dumps(r) for r in results[:-1])


async def test_two_threads_do_not_see_each_other(loop_host, store):
    other = ConversationKey(platform="test", workspace="w", channel="dm-bob", thread="dm")
    llm = ScriptedLLM([Step(text="secret noted"), Step(text="hello bob")])
    agent = make_agent(llm, loop_host, store)
    await agent.reply(incoming("my secret is 42"))
    await agent.reply(incoming("hi", key=other))

    assert all("42" not in (m.content or "") for m in llm.last_request())


async def test_a_question_left_unanswered_by_a_killed_turn_reaches_the_model_with_roles_alternating(
    loop_host, store
):
    # The process died after storing the first question and before any answer.
    await store.append(KEY, [ChatMessage(role="user", content="first question")])
    async with FakeLLMServer([reply("both answered")]) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)
        try:
            answer = await Agent(llm=llm, host=loop_host, store=store, inbox=store).reply(
                incoming("second question")
            )
        finally:
            await llm.aclose()
        sent = server.last_messages()

    assert answer.text == "both answered"
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["content"] == "first question\n\nsecond question"


async def test_an_answer_cut_off_mid_stream_ends_with_the_shown_text_and_a_note(loop_host, store):
    answer = "The air in 94107 is good today, with an AQI of 42 and no alerts in effect."
    # The role chunk and five pieces of text arrive, then the connection drops: nothing is retried.
    async with FakeLLMServer([reply(answer, chunk_chars=10, cut_after=6), reply("next turn")]) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=2)
        events: list[TurnEvent] = []

        async def progress(event: TurnEvent) -> None:
            events.append(event)

        agent = Agent(llm=llm, host=loop_host, store=store, inbox=store)
        try:
            cut = await agent.reply(incoming("How is the air in 94107?"), progress)
            assert len(server.requests) == 1
            await agent.reply(incoming("And tomorrow?"))
        finally:
            await llm.aclose()
        server.assert_complete()
        sent = server.last_messages()

    shown = "".join(e.message for e in events if e.kind == "text")
    assert shown == answer[:50]
    assert cut.text.startswith(shown.rstrip() + "\n\n⚠️ The answer was cut off")
    assert "Ask again" in cut.text
    assert cut.cut_short and not cut.failed
    # What was shown is stored as the answer, so the transcript stays user → assistant → user.
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "How is the air in 94107?"),
        ("assistant", cut.text),
        ("user", "And tomorrow?"),
    ]


async def test_every_model_round_starts_with_a_thinking_event_before_its_text(loop_host, store):
    script = [
        tool_reply(("wait_and_echo", '{"label": "a"}'), content="Let me check."),
        reply("Echoed a."),
    ]
    async with FakeLLMServer(script) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)
        events: list[TurnEvent] = []

        async def progress(event: TurnEvent) -> None:
            events.append(event)

        try:
            answer = await Agent(llm=llm, host=loop_host, store=store, inbox=store).reply(
                incoming("echo a"), progress
            )
        finally:
            await llm.aclose()

    assert answer.text == "Echoed a."
    rounds: list[str] = []
    for event in events:
        if event.kind == "thinking":
            rounds.append("")
        elif event.kind == "text":
            rounds[-1] += event.message
    assert rounds == ["Let me check.", "Echoed a."]

"""Hostile input at the edges: arguments and results nested 5,000 levels deep, megabyte-long values.

A turn must complete with a sensible answer whatever the model or a tool sends; nothing may recurse
without a bound, and no error message may repeat a huge value back to the model.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.discord.render import results_file, results_view
from adapters.slack.render import Level, render_reply
from adapters.terminal.views import attachment_line, format_history, reply_as_json
from bot.agent import Agent, AgentConfig
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.text.render import pretty_json, summarize_result
from bot.turn.context import Budget, build_request
from bot.turn.guards import parse_arguments
from bot.types import AgentReply, ChatMessage, ConversationKey, Incoming, ToolCall, ToolSpec
from tests.fakes.scripted import Call, ScriptedLLM, Step

ROOT = Path(__file__).resolve().parent.parent
KEY = ConversationKey(platform="test", workspace="w", channel="c", thread="hostile")
DEEP = 5000
MEGABYTE = 1_000_000

FREE_FORM = ToolSpec(
    name="store_document",
    description="keeps any JSON document",
    parameters={"type": "object", "properties": {"document": {}}},
    server="s",
    original_name="store_document",
)
BOUNDED = ToolSpec(
    name="lookup",
    description="looks a short code up",
    parameters={
        "type": "object",
        "properties": {
            "code": {"type": "string", "maxLength": 100},
            "count": {"type": "integer"},
            "unit": {"type": "string", "enum": ["m", "km"]},
        },
        "additionalProperties": False,
    },
    server="s",
    original_name="lookup",
)


def nested_arrays(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def ask(text: str, event_id: str | None = None) -> Incoming:
    return Incoming(key=KEY, text=text, user_id="u1", event_id=event_id)


def tool_bodies(llm: ScriptedLLM) -> list[str]:
    """The tool messages of the last request, without their anchor line."""
    return [(m.content or "").partition("\n")[2] for m in llm.last_request() if m.role == "tool"]


def show_everywhere(reply: AgentReply) -> None:
    """Render the reply the way every surface does; none of them may raise."""
    json.dumps(reply_as_json(reply), ensure_ascii=False)
    for index, attachment in enumerate(reply.attachments, 1):
        attachment_line(index, attachment)
        pretty_json(attachment.content)
        pretty_json(attachment.arguments_json())
    for level in Level:
        render_reply(reply, level)
    results_view(reply.attachments)
    results_file(reply.attachments)


@pytest.fixture(scope="module")
async def hostile_host() -> AsyncIterator[MCPHost]:
    server = ServerConfig(
        trustAnnotations=True, command=sys.executable, args=["-m", "tests.mcp_servers.hostile"], cwd=str(ROOT)
    )
    async with MCPHost({"hostile": server}, default_timeout=10.0) as host:
        yield host


def agent(llm: ScriptedLLM, host: MCPHost, store: SQLiteStore, **config: object) -> Agent:
    return Agent(llm=llm, host=host, store=store, inbox=store, config=AgentConfig(**config))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ nesting: arguments


@pytest.mark.parametrize("levels", [65, DEEP])
def test_arguments_nested_deeper_than_64_levels_are_refused_with_a_clear_problem(levels):
    raw = json.dumps({"document": "x"}).replace('"x"', nested_arrays(levels - 1))
    parsed = parse_arguments(raw, FREE_FORM)
    assert parsed.value is None
    assert "nested deeper than 64 levels" in (parsed.problem or "")
    assert "Call store_document again" in (parsed.problem or "")


def test_arguments_nested_64_levels_deep_are_accepted():
    raw = json.dumps({"document": "x"}).replace('"x"', nested_arrays(63))
    assert parse_arguments(raw, FREE_FORM).value is not None


async def test_a_model_sending_arguments_nested_5000_deep_is_told_and_the_turn_completes(loop_host, store):
    deep = '{"label": ' + nested_arrays(DEEP) + "}"
    llm = ScriptedLLM([Step(calls=[Call("wait_and_echo", deep)]), Step(text="I could not send that.")])
    bot = agent(llm, loop_host, store)
    reply = await bot.reply(ask("echo this", event_id="Ev-deep-args"))

    assert reply.text == "I could not send that."
    (body,) = tool_bodies(llm)
    assert "nested deeper than 64 levels" in json.loads(body)["error"]
    (attachment,) = reply.attachments
    assert attachment.is_error
    show_everywhere(reply)
    again = await bot.reply(ask("echo this", event_id="Ev-deep-args"))
    assert again.text == reply.text and len(again.attachments) == 1
    show_everywhere(again)
    format_history(await store.history(KEY))
    llm.assert_complete()


# -------------------------------------------------------------------------------- nesting: results


async def test_a_result_nested_5000_deep_from_a_real_server_completes_the_turn(hostile_host, store):
    llm = ScriptedLLM(
        [Step(calls=[Call("nested_text", {"levels": DEEP})]), Step(text="It is deeply nested.")]
    )
    bot = agent(llm, hostile_host, store)
    reply = await bot.reply(ask("how deep is it?", event_id="Ev-deep-result"))

    assert reply.text == "It is deeply nested."
    (attachment,) = reply.attachments
    assert not attachment.is_error
    assert "nested deeper than 64 levels" in attachment.summary
    (body,) = tool_bodies(llm)
    seen = json.loads(body)
    assert "nested deeper than 64 levels" in seen["_note"] and len(body) < 5000
    stored = next(m for m in await store.history(KEY) if m.role == "tool")
    assert stored.content == "[" * DEEP + '"bottom"' + "]" * DEEP, "the store keeps the result whole"
    show_everywhere(reply)
    again = await bot.reply(ask("how deep is it?", event_id="Ev-deep-result"))
    assert [a.summary for a in again.attachments] == [attachment.summary]
    show_everywhere(again)
    format_history(await store.history(KEY))
    llm.assert_complete()


async def test_structured_content_deeper_than_the_limit_is_flattened_for_model_and_people(
    hostile_host, store
):
    llm = ScriptedLLM([Step(calls=[Call("nested_object", {"levels": 120})]), Step(text="Done.")])
    reply = await agent(llm, hostile_host, store).reply(ask("go deep"))

    assert reply.text == "Done."
    (attachment,) = reply.attachments
    assert not attachment.is_error and "nested deeper than 64 levels" in attachment.summary
    (body,) = tool_bodies(llm)
    assert "nested deeper than 64 levels" in json.loads(body)["_note"]
    show_everywhere(reply)


def test_a_stored_result_nested_5000_deep_is_sent_as_bounded_valid_json():
    call = ToolCall(id="call_1", name="nested_text", arguments='{"levels": 5000}')
    history = [
        ChatMessage(role="user", content="how deep?"),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="call_1", name="nested_text", content=nested_arrays(DEEP)),
    ]
    for squeeze in (False, True):
        sent = build_request("prompt", history, Budget(context_tokens=16000), squeeze=squeeze)
        body = (sent[-1].content or "").partition("\n")[2]
        assert "nested deeper than 64 levels" in json.loads(body)["_note"]


def test_summaries_and_pretty_printing_survive_5000_levels():
    text = nested_arrays(DEEP)
    assert "nested deeper than 64 levels" in summarize_result(text)
    assert pretty_json(text) == text
    assert pretty_json(nested_arrays(100)) == nested_arrays(100)


# ------------------------------------------------------------------------------------ huge values


@pytest.mark.parametrize(
    "arguments",
    [
        {"code": "a" * MEGABYTE},
        {"count": "a" * MEGABYTE},
        {"unit": "a" * MEGABYTE},
        {"a" * MEGABYTE: 1},
    ],
    ids=["over-max-length", "wrong-type", "not-in-enum", "unexpected-key"],
)
def test_a_megabyte_value_is_quoted_at_most_200_characters_in_the_problem(arguments):
    parsed = parse_arguments(json.dumps(arguments), BOUNDED)
    problem = parsed.problem or ""
    assert parsed.value is None and "aaaa" in problem
    assert "a" * 201 not in problem
    assert len(problem) < 1000


def test_a_long_value_names_its_length_and_a_short_one_is_quoted_whole():
    long_problem = parse_arguments(json.dumps({"code": "b" * 5000}), BOUNDED).problem or ""
    assert "5000 characters" in long_problem and "is too long" in long_problem
    short = parse_arguments(json.dumps({"unit": "miles"}), BOUNDED).problem or ""
    assert "'miles' is not one of ['m', 'km']" in short


async def test_a_megabyte_argument_over_max_length_is_not_repeated_back_to_the_model(hostile_host, store):
    huge = Call("short_echo", {"text": "z" * MEGABYTE})
    llm = ScriptedLLM([Step(calls=[huge]), Step(text="Too long.")])
    reply = await agent(llm, hostile_host, store).reply(ask("echo a megabyte"))

    assert reply.text == "Too long."
    (body,) = tool_bodies(llm)
    assert "too long" in body and "z" * 201 not in body and len(body) < 2000
    (attachment,) = reply.attachments
    assert attachment.is_error and "z" * 201 not in attachment.content


async def test_a_megabyte_tool_name_is_not_repeated_back_to_the_model(hostile_host, store):
    llm = ScriptedLLM([Step(calls=[Call("x" * MEGABYTE, {})]), Step(text="No such tool.")])
    reply = await agent(llm, hostile_host, store).reply(ask("call a long name"))

    assert reply.text == "No such tool."
    (body,) = tool_bodies(llm)
    assert "x" * 201 not in body and len(body) < 2000
    assert "x" * 201 not in reply.attachments[0].summary + reply.attachments[0].content

"""Assembling streamed answers from chunks built by hand, in the wire shapes providers send."""

from __future__ import annotations

import itertools
import json
from typing import Any

from bot.model.stream import StreamAssembler
from bot.types import ChatMessage, Completion, ToolCall, Usage


def chunk(
    delta: dict[str, Any] | None = None, *, finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """One `chat.completion.chunk` as it comes off the wire; no delta means a usage-only chunk."""
    data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    data["choices"] = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
    )
    if usage is not None:
        data["usage"] = usage | {"total_tokens": sum(usage.values())}
    return data


def fragment(
    index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    function: dict[str, str] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    out: dict[str, Any] = {"function": function}
    if index is not None:
        out["index"] = index
    if id is not None:
        out["id"] = id
    return {"tool_calls": [out]}


def assemble(chunks: list[dict[str, Any]]) -> tuple[Completion, list[str], StreamAssembler]:
    assembler = StreamAssembler()
    shown = [text for c in chunks if (text := assembler.feed(c))]
    ids = (f"call_made_{n}" for n in itertools.count(1))
    return assembler.completion(lambda: next(ids)), shown, assembler


def test_text_deltas_come_out_one_by_one_and_join_into_the_answer() -> None:
    completion, shown, assembler = assemble(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "The air "}),
            chunk({"content": "is good"}),
            chunk({"content": "."}),
            chunk({}, finish="stop"),
        ]
    )
    assert shown == ["The air ", "is good", "."]
    assert completion == Completion(message=ChatMessage(role="assistant", content="The air is good."))
    assert assembler.finished and assembler.finish_reason == "stop"


def test_usage_comes_from_the_final_chunk_without_choices() -> None:
    completion, _, _ = assemble(
        [
            chunk({"role": "assistant", "content": "ok"}),
            chunk({}, finish="stop"),
            chunk(usage={"prompt_tokens": 21, "completion_tokens": 4}),
        ]
    )
    assert completion.usage == Usage(prompt_tokens=21, completion_tokens=4)
    assert completion.message.content == "ok"


def test_running_usage_on_every_chunk_keeps_the_last_figures() -> None:
    completion, _, _ = assemble(
        [
            chunk({"content": "a"}, usage={"prompt_tokens": 10, "completion_tokens": 1}),
            chunk({"content": "b"}, finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 2}),
        ]
    )
    assert completion.usage == Usage(prompt_tokens=10, completion_tokens=2)


def test_a_stream_without_usage_has_none() -> None:
    completion, _, _ = assemble([chunk({"content": "ok"}), chunk({}, finish="stop")])
    assert completion.usage is None


def test_a_tool_call_split_mid_string_in_id_name_and_arguments_assembles_exactly() -> None:
    arguments = '{"area_code": "94107", "note": "say \\"hi\\" ☃"}'
    pieces = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk(fragment(0, id="cal")),
        chunk(fragment(0, id="l_a")),
        chunk(fragment(0, name="get_environ")),
        chunk(fragment(0, name="ment_status")),
        *(chunk(fragment(0, args=piece)) for piece in pieces),
        chunk({}, finish="tool_calls"),
    ]
    completion, shown, _ = assemble(chunks)
    assert shown == []
    assert completion.message.content is None
    assert completion.message.tool_calls == (
        ToolCall(id="call_a", name="get_environment_status", arguments=arguments),
    )
    assert json.loads(completion.message.tool_calls[0].arguments)["note"] == 'say "hi" ☃'


def test_interleaved_fragments_of_parallel_calls_are_told_apart_by_index() -> None:
    chunks = [
        chunk(fragment(1, id="call_b", name="simulate_geolocation", args="")),
        chunk(fragment(0, id="call_a", name="get_environment_status", args="")),
        chunk(fragment(1, args='{"lat": 3')),
        chunk(fragment(0, args='{"area_')),
        chunk(fragment(1, args='1.2, "lng": 121.4}')),
        chunk(fragment(0, args='code": "A1001"}')),
        chunk({}, finish="tool_calls"),
    ]
    completion, _, _ = assemble(chunks)
    assert completion.message.tool_calls == (
        ToolCall(id="call_a", name="get_environment_status", arguments='{"area_code": "A1001"}'),
        ToolCall(id="call_b", name="simulate_geolocation", arguments='{"lat": 31.2, "lng": 121.4}'),
    )


def test_text_before_tool_calls_is_kept_next_to_them() -> None:
    completion, shown, _ = assemble(
        [
            chunk({"content": "Let me check."}),
            chunk(fragment(0, id="call_1", name="get_environment_status", args='{"area_code": "1"}')),
            chunk({}, finish="tool_calls"),
        ]
    )
    assert shown == ["Let me check."]
    assert completion.message.content == "Let me check."
    assert [c.name for c in completion.message.tool_calls] == ["get_environment_status"]


def test_calls_without_ids_get_ids_made_for_them() -> None:
    completion, _, _ = assemble(
        [
            chunk(fragment(0, name="a", args="{}")),
            chunk(fragment(1, name="b", args="{}")),
            chunk({}, finish="tool_calls"),
        ]
    )
    assert [c.id for c in completion.message.tool_calls] == ["call_made_1", "call_made_2"]


def test_calls_without_an_index_are_told_apart_by_their_ids() -> None:
    completion, _, _ = assemble(
        [
            chunk(fragment(None, id="call_x", name="a", args='{"q": ')),
            chunk(fragment(None, args='"1"}')),
            chunk(fragment(None, id="call_y", name="b", args="{}")),
            chunk({}, finish="tool_calls"),
        ]
    )
    assert completion.message.tool_calls == (
        ToolCall(id="call_x", name="a", arguments='{"q": "1"}'),
        ToolCall(id="call_y", name="b", arguments="{}"),
    )


def test_an_unfinished_stream_is_not_finished_and_keeps_what_was_shown() -> None:
    assembler = StreamAssembler()
    assembler.feed(chunk({"content": "The air is "}))
    assembler.feed(chunk(fragment(0, id="call_1", name="get_environment_status", args='{"area')))
    assert not assembler.finished
    assert assembler.text == "The air is "


def test_an_empty_stream_is_an_empty_answer() -> None:
    completion, _, _ = assemble([chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")])
    assert completion.message == ChatMessage(role="assistant", content="")


def test_other_choices_are_ignored() -> None:
    data = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 1, "delta": {"content": "second"}, "finish_reason": None},
            {"index": 0, "delta": {"content": "first"}, "finish_reason": None},
        ],
    }
    completion, shown, _ = assemble([data, chunk({}, finish="stop")])
    assert shown == ["first"]
    assert completion.message.content == "first"


def test_chunks_of_an_odd_shape_are_skipped_not_fatal() -> None:
    odd: list[Any] = [
        None,
        "text",
        {"choices": "none"},
        {"choices": [{"index": 0, "delta": {"content": 5, "tool_calls": "no"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [7, {"index": 0, "function": "f"}]}}]},
        {"usage": {"prompt_tokens": "many"}, "choices": []},
    ]
    completion, shown, assembler = assemble([*odd, chunk({"content": "ok"}), chunk({}, finish="stop")])
    assert shown == ["ok"]
    assert completion.message == ChatMessage(role="assistant", content="ok")
    assert completion.usage == Usage(prompt_tokens=0, completion_tokens=0)
    assert assembler.chunks == 8

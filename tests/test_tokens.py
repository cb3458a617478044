"""Token estimates: offline, monotonic, and within a plausible range of real tokenizer counts.

The reference counts are roughly what OpenAI's cl100k tokenizer gives for the same strings; the
asserted band is ±30% around them, wider than the ±15% the module aims for, so these tests pin the
heuristic's shape without pretending to be a tokenizer.
"""

from __future__ import annotations

import json

import pytest

from bot.model.tokens import estimate_message_tokens, estimate_tokens, estimate_tools_tokens
from bot.types import ChatMessage, ToolCall, ToolSpec


def test_empty_text_costs_nothing_and_any_text_costs_at_least_one_token() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens(".") == 1


@pytest.mark.parametrize(
    ("text", "real"),
    [
        ("The quick brown fox jumps over the lazy dog.", 10),
        ('{"area_code": "94107"}', 8),
        ("Hello, how are you doing today? I hope everything is going well with your project.", 17),
        ("def add(a, b):\n    return a + b\n", 13),
        ("東京都の天気は晴れです", 11),
    ],
)
def test_estimates_are_close_to_real_tokenizer_counts(text: str, real: int) -> None:
    estimate = estimate_tokens(text)
    assert real * 0.7 <= estimate <= real * 1.3, (text, estimate, real)


def test_a_long_english_text_is_about_four_characters_a_token() -> None:
    text = "The environment service reports air quality and temperature for each area code. " * 50
    chars_per_token = len(text) / estimate_tokens(text)
    assert 3.4 <= chars_per_token <= 4.8


def test_json_is_denser_than_prose_of_the_same_length() -> None:
    payload = json.dumps([{"id": i, "ok": True, "lat": 37.77, "lng": -122.41} for i in range(40)])
    prose = ("weather is mild and the air is clean today " * 200)[: len(payload)]
    assert estimate_tokens(payload) > estimate_tokens(prose) * 1.4


def test_cjk_text_costs_about_one_token_a_character() -> None:
    text = "你好世界" * 25
    assert 90 <= estimate_tokens(text) <= 110


def test_adding_text_never_lowers_the_estimate() -> None:
    pieces = ["word ", "{", '"k": 1', "東", "é", "🙂", "\n", "12345", "  "]
    text = ""
    previous = 0
    for round_ in range(30):
        text += pieces[round_ % len(pieces)]
        current = estimate_tokens(text)
        assert current >= previous
        previous = current


def test_a_big_tool_result_is_estimated_quickly_and_in_proportion() -> None:
    chunk = json.dumps({"station": "SFO-12", "pm25": 7.4, "note": "light wind from the west"})
    one = estimate_tokens(chunk)
    many = estimate_tokens(chunk * 2000)
    assert one * 1900 <= many <= one * 2000


def test_messages_cost_their_content_plus_a_per_message_overhead() -> None:
    user = ChatMessage(role="user", content="What is the air like in 94107?")
    one = estimate_message_tokens([user])
    two = estimate_message_tokens([user, user])
    assert estimate_message_tokens([]) == 0
    assert one > estimate_tokens(user.content or "")
    assert two - one == one - 3  # the reply priming is counted once


def test_tool_calls_and_tool_results_are_counted() -> None:
    call = ToolCall(id="call_1", name="get_environment_status", arguments='{"area_code": "94107"}')
    bare = ChatMessage(role="assistant", content=None)
    calling = ChatMessage(role="assistant", content=None, tool_calls=(call,))
    result = ChatMessage(role="tool", content='{"aqi": 42}', tool_call_id="call_1")
    assert estimate_message_tokens([calling]) >= estimate_message_tokens([bare]) + 10
    assert estimate_message_tokens([calling, result]) > estimate_message_tokens([calling]) + 5


def test_tool_list_estimate_grows_with_each_tool_and_is_plausible() -> None:
    def spec(name: str) -> ToolSpec:
        return ToolSpec(
            name=name,
            description="Current air quality, temperature and alerts for a US area code.",
            parameters={
                "type": "object",
                "properties": {"area_code": {"type": "string", "description": "Five-digit ZIP code"}},
                "required": ["area_code"],
            },
            server="env",
            original_name=name,
        )

    assert estimate_tools_tokens([]) == 0
    one = estimate_tools_tokens([spec("get_environment_status")])
    two = estimate_tools_tokens([spec("get_environment_status"), spec("simulate_geolocation")])
    # OpenAI bills a tool like this at roughly 60–80 prompt tokens.
    assert 40 <= one <= 110
    assert two > one + 30

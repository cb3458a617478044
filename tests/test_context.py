"""What the model is sent: anchors, cut results, superseded repeats, compression (S8, S9, S11)."""

from __future__ import annotations

import itertools
import json

from bot.model.tokens import estimate_message_tokens
from bot.text.turn_note import note_of, split_note, without_note
from bot.turn.context import Budget, build_request, cut_result
from bot.types import ChatMessage, ToolCall

PROMPT = "Use tools for real-time data."


def turn(n: int, tool: str = "lookup", size: int = 50) -> list[ChatMessage]:
    """A user question, one tool round, and an answer."""
    call = ToolCall(id=f"call_{n}", name=tool, arguments=json.dumps({"n": n}))
    result = json.dumps({"n": n, "data": "x" * size})
    return [
        ChatMessage(role="user", content=f"question {n}"),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id=call.id, name=tool, content=result),
        ChatMessage(role="assistant", content=f"answer {n}"),
    ]


def assert_pairs_intact(messages: list[ChatMessage]) -> None:
    """Every assistant tool call is followed by exactly its tool messages, in order."""
    for index, message in enumerate(messages):
        if message.tool_calls:
            following = messages[index + 1 : index + 1 + len(message.tool_calls)]
            assert [m.tool_call_id for m in following] == [c.id for c in message.tool_calls]
        if message.role == "tool":
            assert any(message.tool_call_id in [c.id for c in m.tool_calls] for m in messages[:index])


def test_each_result_is_anchored_and_stays_valid_json():
    history = [*turn(1)[:3]]
    history[2] = ChatMessage(role="tool", tool_call_id="call_1", name="lookup", content='plain "text"\nline')
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    anchor, _, body = (sent[-1].content or "").partition("\n")
    assert anchor == 'Tool "lookup" ran successfully. Its raw result follows:'
    assert json.loads(body) == 'plain "text"\nline'


def test_failed_results_carry_the_failure_anchor():
    history = turn(1)[:3]
    history[2] = ChatMessage(role="tool", tool_call_id="call_1", name="lookup", content="{}", is_error=True)
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    assert (sent[-1].content or "").startswith('Tool "lookup" failed.')


def test_a_huge_result_is_cut_to_valid_json_that_says_so():
    big = json.dumps({"status": "ok", "items": [{"id": i, "text": "y" * 100} for i in range(500)]})
    cut = cut_result(big, 300)
    parsed = json.loads(cut)
    assert parsed["result"]["status"] == "ok"
    assert "…495 more items" in parsed["result"]["items"]
    assert "full" in parsed["_note"] and len(cut) < len(big) / 10


def test_only_the_latest_result_of_a_tool_repeated_across_turns_is_sent():
    history = [*turn(1), *turn(2), *turn(3)]
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    bodies = [json.loads((m.content or "").partition("\n")[2]) for m in sent if m.role == "tool"]
    assert "superseded" in bodies[0] and "superseded" in bodies[1]
    assert bodies[2]["n"] == 3


def test_parallel_calls_of_one_tool_in_one_round_are_all_kept():
    calls = (ToolCall(id="a", name="lookup", arguments="{}"), ToolCall(id="b", name="lookup", arguments="{}"))
    history = [
        ChatMessage(role="user", content="compare"),
        ChatMessage(role="assistant", tool_calls=calls),
        ChatMessage(role="tool", tool_call_id="a", name="lookup", content='{"area": 1}'),
        ChatMessage(role="tool", tool_call_id="b", name="lookup", content='{"area": 2}'),
        ChatMessage(role="assistant", content="done"),
        ChatMessage(role="user", content="thanks"),
    ]
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    assert all("superseded" not in (m.content or "") for m in sent)


def test_past_the_safety_line_the_oldest_turns_become_a_summary_and_pairs_stay_whole():
    history = [message for n in range(40) for message in turn(n, tool=f"tool_{n % 2}", size=400)]
    history.append(ChatMessage(role="user", content="latest question"))
    budget = Budget(context_tokens=4000)
    sent = build_request(PROMPT, history, budget)

    assert sent[-1].content == "latest question"
    assert sent[0].content == PROMPT, "the system prompt stays as it is for a provider's cache"
    assert "Summary of the earlier conversation" in (sent[1].content or "")
    assert "question 0" in (sent[1].content or "")
    assert sum(1 for m in sent if m.role == "system") == 1
    assert estimate_message_tokens(sent) <= 4000 * 0.8
    assert_pairs_intact(sent[1:])
    assert sent[1].role == "user", "kept history starts at a whole turn"


def test_the_current_turn_is_always_sent_whole_even_over_budget():
    history = turn(1, size=20000)
    sent = build_request(PROMPT, history, Budget(context_tokens=2000))
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "assistant"]


def test_squeeze_keeps_only_the_current_turn_and_a_summary():
    history = [*turn(1), *turn(2), ChatMessage(role="user", content="now")]
    sent = build_request(PROMPT, history, Budget(context_tokens=16000), squeeze=True)
    assert [m.role for m in sent] == ["system", "user"]
    assert "question 1" in (sent[1].content or "") and "answer 2" in (sent[1].content or "")
    assert split_note(sent[1].content or "")[0] == "now"
    # The turn's note still ends the message, after the person's own text, found again as such.
    noted = build_request(PROMPT, history, Budget(context_tokens=16000), squeeze=True, note="It is noon.")
    assert split_note(noted[1].content or "") == ("now", "It is noon.")
    assert noted[0].content == PROMPT


def test_the_summary_of_a_very_long_thread_stays_bounded_and_quick():
    history = [message for n in range(1000) for message in turn(n, size=300)]
    history.append(ChatMessage(role="user", content="latest"))
    for squeeze in (False, True):
        sent = build_request(PROMPT, history, Budget(context_tokens=16000), squeeze=squeeze)
        assert estimate_message_tokens(sent) <= 16000 * 0.8
        assert "earlier turns omitted" in (sent[1].content or "")


def test_a_result_is_labelled_by_its_own_tool_even_when_servers_reuse_call_ids():
    first = ToolCall(id="call_0", name="simulate_geolocation", arguments="{}")
    second = ToolCall(id="call_0", name="get_environment_status", arguments="{}")
    history = [
        ChatMessage(role="user", content="where and how"),
        ChatMessage(role="assistant", tool_calls=(first,)),
        ChatMessage(role="tool", tool_call_id="call_0", name="simulate_geolocation", content="{}"),
        ChatMessage(role="assistant", tool_calls=(second,)),
        ChatMessage(role="tool", tool_call_id="call_0", name="get_environment_status", content="{}"),
    ]
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    labels = [(m.content or "").partition("\n")[0] for m in sent if m.role == "tool"]
    assert labels == [
        'Tool "simulate_geolocation" ran successfully. Its raw result follows:',
        'Tool "get_environment_status" ran successfully. Its raw result follows:',
    ]


def test_a_superseded_result_names_its_arguments_so_the_model_can_ask_again():
    sent = build_request(PROMPT, [*turn(1), *turn(2)], Budget(context_tokens=16000))
    first = json.loads((next(m for m in sent if m.role == "tool").content or "").partition("\n")[2])
    assert '{"n": 1}' in first["superseded"] and "call it again" in first["superseded"]


def test_user_messages_in_a_row_are_merged_so_roles_alternate():
    # A turn killed before its answer leaves its question unanswered; the next question follows it.
    history = [
        *turn(1),
        ChatMessage(role="user", content="question 2"),
        ChatMessage(role="user", content="question 3"),
    ]
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[-1].content == "question 2\n\nquestion 3"
    assert_pairs_intact(sent)


def test_an_unanswered_question_inside_the_history_is_merged_with_the_next_one():
    history = [ChatMessage(role="user", content="lost question"), *turn(2), *turn(3)[:1]]
    for squeeze in (False, True):
        sent = build_request(PROMPT, history, Budget(context_tokens=16000), squeeze=squeeze)
        roles = [m.role for m in sent]
        assert all(not (a == b == "user") for a, b in itertools.pairwise(roles)), roles
    sent = build_request(PROMPT, history, Budget(context_tokens=16000))
    assert sent[1].content == "lost question\n\nquestion 2"


def test_compression_goes_well_below_the_line_and_then_holds_for_the_next_turns():
    budget = Budget(context_tokens=4000)
    history: list[ChatMessage] = []
    starts = []
    for n in range(40):
        history += turn(n, tool=f"tool_{n % 2}", size=400)
        sent = build_request(PROMPT, [*history, ChatMessage(role="user", content=f"next {n}")], budget)
        assert estimate_message_tokens(sent) <= 4000 * 0.8
        assert sent[0].content == PROMPT
        starts.append(sent[1].content)
    # Each compression keeps the turns after it for several turns: the request then starts the same.
    compressions = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    assert 3 <= compressions <= 40 // 4, compressions


def test_the_turns_note_ends_the_request_so_the_next_one_starts_with_all_before_it():
    budget = Budget(context_tokens=16000)
    asking = [*turn(1), *turn(2, tool="other")[:1]]  # another tool: no result is superseded
    answered = [*turn(1), *turn(2, tool="other")[:3]]
    first = build_request(PROMPT, asking, budget, note="It is noon.")
    second = build_request(PROMPT, answered, budget, note="It is 12:01.")
    # The turn's message carries the note while it ends the request; once a tool answered, the result
    # does, and the message is sent as its person wrote it.
    assert (first[-1].role, split_note(first[-1].content or "")) == ("user", ("question 2", "It is noon."))
    assert (second[-1].role, note_of(second)) == ("tool", "It is 12:01.")
    assert second[len(first) - 1].content == "question 2"
    # So the second request starts with the first one up to where its note began.
    assert second[: len(first) - 1] == first[:-1]
    assert (first[-1].content or "").startswith(second[len(first) - 1].content or "")
    # The offline model reads the result as its tool wrote it.
    assert without_note(second)[-1].content == build_request(PROMPT, answered, budget)[-1].content
    assert sum(1 for m in second if split_note(m.content or "")[1]) == 1

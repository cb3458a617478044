"""The offline model with the memory tools: "remember that …", "what do you remember about me?",
"forget …", and remembered facts of the system prompt filling a question's missing area code.

Every request is what the model is really sent: the history presented by the core's own
`build_request` (the certainty line, text results as JSON strings)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bot.model.offline import OfflineModel
from bot.turn.context import Budget, build_request
from bot.types import ChatMessage, ToolSpec, no_progress
from tests.test_offline import ENV, ENV_RESULT, GEO, GEO_RESULT, SEED_QUESTION

PROMPT = "You are nerve, a helpful assistant."

# Exposed under names of their own, so the model is seen to pick them by server and original name.
REMEMBER = ToolSpec(
    name="memory_remember",
    description=(
        "Remember a fact the person asked you to keep, written about its subject (e.g. "
        "'area code is A1001'), for the person or for this place."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "What to remember, as a statement about the subject."},
            "about": {"type": "string", "enum": ["me", "here"]},
            "anywhere": {"type": "boolean", "description": "A personal memory usable in shared places too."},
        },
        "required": ["text", "about"],
    },
    server="memory",
    original_name="remember",
)
RECALL = ToolSpec(
    name="memory_recall",
    description="Search what you remember about the person and this place (area codes, preferences).",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to search; empty lists the most recent."}
        },
        "required": ["query"],
    },
    server="memory",
    original_name="recall",
)
FORGET = ToolSpec(
    name="memory_forget",
    description="Forget one remembered fact by its id.",
    parameters={
        "type": "object",
        "properties": {"memory_id": {"type": "string"}},
        "required": ["memory_id"],
    },
    server="memory",
    original_name="forget",
)
MEMORY = [REMEMBER, RECALL, FORGET]
TOOLS = [ENV, GEO, *MEMORY]

AREA = {
    "id": "m3f9a2c1",
    "text": "area code is A1001",
    "about": "me",
    "anywhere": False,
    "saved": "2026-12-07",
}
OTHER_AREA = {
    "id": "m0b7e4d2",
    "text": "area code is B2002",
    "about": "me",
    "anywhere": False,
    "saved": "2026-12-06",
}
DEPLOYS = {
    "id": "m5c1d8e0",
    "text": "deploys are on Fridays",
    "about": "here",
    "anywhere": False,
    "saved": "2026-12-05",
}

Respond = Callable[[str, dict[str, Any]], tuple[str, bool]]


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def ask(history: list[ChatMessage], tools: list[ToolSpec] = TOOLS, system: str = PROMPT) -> ChatMessage:
    sent = build_request(system, history, Budget(context_tokens=16000))
    return (await OfflineModel().complete(sent, tools, no_progress)).message


def calls(message: ChatMessage, tools: list[ToolSpec] = TOOLS) -> list[tuple[str, dict[str, Any]]]:
    """The calls as (original name, arguments)."""
    original = {t.name: t.original_name for t in tools}
    return [(original[c.name], json.loads(c.arguments)) for c in message.tool_calls]


async def converse(
    question: str, respond: Respond, tools: list[ToolSpec] = TOOLS, system: str = PROMPT
) -> tuple[list[list[tuple[str, dict[str, Any]]]], str]:
    """The rounds of calls the model makes for a question, each answered by `respond`, and its answer."""
    history = [user(question)]
    rounds: list[list[tuple[str, dict[str, Any]]]] = []
    original = {t.name: t.original_name for t in tools}
    for _ in range(5):
        reply = await ask(history, tools, system)
        history.append(reply)
        if not reply.tool_calls:
            return rounds, reply.content or ""
        rounds.append(calls(reply, tools))
        for call in reply.tool_calls:
            content, failed = respond(original[call.name], json.loads(call.arguments))
            history.append(
                ChatMessage(
                    role="tool", tool_call_id=call.id, name=call.name, content=content, is_error=failed
                )
            )
    raise AssertionError(f"no answer after {len(rounds)} rounds: {rounds}")


def memories(*items: dict[str, Any], more: bool = False) -> str:
    return json.dumps({"memories": list(items), "more": more})


def no_call(name: str, args: dict[str, Any]) -> tuple[str, bool]:
    raise AssertionError(f"unexpected call {name}({args})")


# --- remember ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "arguments"),
    [
        ("remember that my area code is A1001", {"text": "area code is A1001", "about": "me"}),
        ("Remember: my area code is A1001.", {"text": "area code is A1001", "about": "me"}),
        ("please remember my area code is A1001", {"text": "area code is A1001", "about": "me"}),
        ("<@U123> can you remember that I'm vegetarian?", {"text": "is vegetarian", "about": "me"}),
        ("remember that I like green tea", {"text": "likes green tea", "about": "me"}),
        (
            "remember for this channel, deploys are on Fridays",
            {"text": "deploys are on Fridays", "about": "here"},
        ),
        (
            "remember for everyone here: our standup is at 10:30",
            {"text": "standup is at 10:30", "about": "here"},
        ),
        (
            "remember in this channel that deploys are on Fridays",
            {"text": "deploys are on Fridays", "about": "here"},
        ),
        (
            "remember that my area code is A1001 (use it anywhere)",
            {"text": "area code is A1001", "about": "me", "anywhere": True},
        ),
        (
            "remember my area code is A1001, use it everywhere.",
            {"text": "area code is A1001", "about": "me", "anywhere": True},
        ),
    ],
)
async def test_remember_calls_remember_with_the_fact_about_its_subject(question, arguments):
    reply = await ask([user(question)])

    assert calls(reply) == [("remember", arguments)]
    assert reply.tool_calls[0].name == "memory_remember"


async def test_after_remember_the_answer_is_the_tools_own_words():
    said = "Remembered for you: area code is A1001 (id m3f9a2c1)"

    rounds, answer = await converse("remember that my area code is A1001", lambda name, args: (said, False))

    assert rounds == [[("remember", {"text": "area code is A1001", "about": "me"})]]
    assert answer == said


async def test_a_refused_memory_is_said_to_be_not_remembered_with_the_reason():
    refusal = "That looks like a password or key; I don't keep secrets. Nothing was saved."

    rounds, answer = await converse(
        "remember that my api key is sk-abc123", lambda name, args: (refusal, True)
    )

    assert rounds == [[("remember", {"text": "api key is sk-abc123", "about": "me"})]]
    assert answer == f"I didn't remember that: {refusal}"


# --- recall -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question", ["what do you remember about me?", "What do you know about me", "what do you remember?"]
)
async def test_what_do_you_remember_lists_the_memories_with_their_ids(question):
    rounds, answer = await converse(question, lambda name, args: (memories(AREA, DEPLOYS), False))

    assert rounds == [[("recall", {"query": ""})]]
    assert answer.startswith("Here's what I remember:")
    assert "- area code is A1001 (id m3f9a2c1)" in answer
    assert "- deploys are on Fridays (this place; id m5c1d8e0)" in answer
    assert "There's more" not in answer


async def test_a_longer_list_says_there_is_more():
    _, answer = await converse(
        "what do you remember about me?", lambda n, a: (memories(AREA, more=True), False)
    )

    assert "- area code is A1001 (id m3f9a2c1)" in answer
    assert "There's more" in answer


async def test_nothing_remembered_is_said_plainly():
    _, answer = await converse("what do you remember about me?", lambda name, args: (memories(), False))

    assert answer == "I don't remember anything about you yet."


async def test_do_you_remember_my_area_code_searches_for_those_words():
    rounds, answer = await converse("do you remember my area code?", lambda n, a: (memories(AREA), False))

    assert rounds == [[("recall", {"query": "area code"})]]
    assert "- area code is A1001 (id m3f9a2c1)" in answer


async def test_a_failed_recall_is_reported_with_its_reason():
    _, answer = await converse(
        "what do you remember about me?", lambda n, a: ("the memory store is down", True)
    )

    assert answer == "I couldn't look through what I remember: the memory store is down"


# --- forget -----------------------------------------------------------------------------------------


async def test_forget_looks_the_words_up_then_forgets_the_memory_they_match():
    def respond(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "recall":
            return memories(OTHER_AREA, AREA), False  # the search ranks the wrong one first
        return (
            (f"Forgot: {AREA['text']}", False) if args == {"memory_id": AREA["id"]} else ("unknown id", True)
        )

    rounds, answer = await converse("forget that my area code is A1001", respond)

    assert rounds == [[("recall", {"query": "area code A1001"})], [("forget", {"memory_id": "m3f9a2c1"})]]
    assert answer == "Forgot: area code is A1001"


async def test_forget_with_nothing_matching_says_so_and_forgets_nothing():
    def respond(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        assert name == "recall", "nothing matches, so nothing may be forgotten"
        return memories(OTHER_AREA), False

    rounds, answer = await converse("forget that my area code is A1001", respond)

    assert rounds == [[("recall", {"query": "area code A1001"})]]
    assert (
        answer == "I don't remember anything matching “area code is A1001”, so there was nothing to forget."
    )


async def test_forget_an_id_forgets_it_at_once():
    said = "Forgot: area code is A1001"

    rounds, answer = await converse("forget m3f9a2c1", lambda name, args: (said, False))

    assert rounds == [[("forget", {"memory_id": "m3f9a2c1"})]]
    assert answer == said


async def test_forgetting_another_persons_memory_is_refused_in_the_tools_words():
    refusal = "No memory m0b7e4d2 of yours; nothing was forgotten."

    _, answer = await converse("forget m0b7e4d2", lambda name, args: (refusal, True))

    assert answer == f"I couldn't forget that: {refusal}"


async def test_forget_everything_explains_how_instead_of_guessing():
    rounds, answer = await converse("forget everything", no_call)

    assert rounds == []
    assert "forget <id>" in answer


# --- the other tools are unaffected -----------------------------------------------------------------


async def test_the_seed_question_still_calls_its_tools_and_never_a_memory_tool():
    reply = await ask([user(SEED_QUESTION)])

    assert calls(reply) == [
        ("get_environment_status", {"area_code": "A1001"}),
        ("simulate_geolocation", {"lat": 31.23, "lng": 121.47, "radius": 100}),
    ]


async def test_a_question_sharing_words_with_the_memory_tools_never_saves_a_memory():
    # "keep", "area code", a quoted value and "me": enough for the general ranking to fill `remember`.
    reply = await ask([user("Keep an eye on the air in area code 'A1001' for me")])

    assert calls(reply) == [("get_environment_status", {"area_code": "A1001"})]


async def test_what_do_you_know_about_an_area_asks_the_tools_not_the_memory():
    reply = await ask([user("What do you know about the air quality in A1001?")])

    assert calls(reply) == [("get_environment_status", {"area_code": "A1001"})]


async def test_memory_tools_of_another_server_are_not_taken_for_the_products():
    lookalike = [
        ToolSpec(
            name=t.name,
            description=t.description,
            parameters=t.parameters,
            server="notes",
            original_name=t.original_name,
        )
        for t in MEMORY
    ]

    reply = await ask([user("remember that my area code is A1001")], [ENV, GEO, *lookalike])

    assert not any(c.name.startswith("memory_") for c in reply.tool_calls)


async def test_hello_and_the_help_say_what_may_be_asked_of_memory():
    hello = (await ask([user("hello")])).content or ""
    lost = (await ask([user("What is the meaning of life?")])).content or ""

    for text in (hello, lost):
        assert "“remember that my area code is A1001”" in text
        assert "“what do you remember about me?”" in text
        assert "memory_remember" not in text  # the tools themselves are not listed for other questions
    assert "remember" not in ((await ask([user("hello")], [ENV, GEO])).content or "")


# --- remembered facts in the system prompt ----------------------------------------------------------

REMEMBERING = (
    f"{PROMPT}\n\nWhat you remember (facts people asked you to keep):\nAbout you:\n"
    "- area code is A1001 (saved 2026-12-07)\n- likes green tea\n"
    "About this channel:\n- deploys are on Fridays"
)


async def test_a_remembered_area_code_fills_a_question_that_names_none():
    question = "How is the air quality today?"
    reply = await ask([user(question)], system=REMEMBERING)

    assert calls(reply) == [("get_environment_status", {"area_code": "A1001"})]
    # Without it, the area code is asked for, as before.
    assert (await ask([user(question)])).tool_calls == ()


async def test_a_place_the_question_names_comes_before_a_remembered_one():
    assert calls(await ask([user("How is the air quality in B2002?")], system=REMEMBERING)) == [
        ("get_environment_status", {"area_code": "B2002"})
    ]
    near = await ask([user("What's the air like near 31.23, 121.47?")], system=REMEMBERING)
    assert calls(near) == [("simulate_geolocation", {"lat": 31.23, "lng": 121.47, "radius": 100})]
    # The next round follows the coordinates' area, as without a memory.
    history = [
        user("What's the air like near 31.23, 121.47?"),
        near,
        ChatMessage(
            role="tool", tool_call_id=near.tool_calls[0].id, name=GEO.name, content=json.dumps(GEO_RESULT)
        ),
    ]
    assert calls(await ask(history, system=REMEMBERING)) == [
        ("get_environment_status", {"area_code": "R7372"})
    ]


async def test_the_answer_from_a_remembered_area_code_is_for_that_area():
    question = "How is the air quality today?"
    first = await ask([user(question)], system=REMEMBERING)
    result = ChatMessage(
        role="tool", tool_call_id=first.tool_calls[0].id, name=ENV.name, content=json.dumps(ENV_RESULT)
    )

    answer = await ask([user(question), first, result], system=REMEMBERING)

    assert "for A1001" in (answer.content or "") and "AQI 42 (Good)" in (answer.content or "")


async def test_lines_after_the_remembered_section_are_not_taken_for_memories():
    system = (
        f"{PROMPT}\n\nWhat you remember:\n- likes green tea\n\n"
        "Summary of the earlier conversation (compressed to save space):\n"
        "- user: is A1001 nice? → you: yes"
    )

    reply = await ask([user("How is the air quality today?")], system=system)

    assert reply.tool_calls == ()

"""`/prompt` in the chat: the prompts the servers offer, listed with their arguments, and one started
as a turn with the server's text as the question.

`nerve chat` runs on a pseudo-terminal against the asking test server (tests/mcp_servers/asks.py,
prompts `summarize(topic, tone?)` and `hello`) and the local fake model service, whose requests
show what the model was asked.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.llm_server import FakeLLMServer, own_text, reply
from tests.test_terminal import PROMPT, nerve, terminal
from tests.test_terminal_forms import env_for

WEATHER = "Summarize what you know about the weather in a dry tone."


def question(request: dict[str, Any]) -> str:
    """What the person asked, as the model read it: the last user message of its request (without
    the turn's note of the time now)."""
    return own_text([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


async def test_prompt_lists_the_prompts_with_their_arguments_and_says_what_is_wrong_with_one(tmp_path):
    async with (
        FakeLLMServer([]) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b"/help\r")
        at = await term.expect(b"/prompt NAME [arg=value ...] starts one", after=at)

        at = await term.expect(PROMPT, after=at)
        term.type(b"/prompt\r")
        at = await term.expect(b"a value without a name fills the first required argument", after=at)
        listed = [
            b"summarize topic=\xe2\x80\xa6 [tone=\xe2\x80\xa6]",
            b" \xe2\x80\x94 Summarize what is known about a topic.",
            b"(asks)",
            b"topic: What to summarize; completion offers a few.",
            b"tone (optional): How it should sound, e.g. dry or cheerful.",
            b"hello",
            b" \xe2\x80\x94 Say hello.",
        ]
        for line in listed:
            at = await term.expect(line, after=at)

        mistakes = [
            (b"/prompt summarize tone=dry", b"The prompt summarize needs: topic."),
            (b"/prompt summarize colour=red", b"The prompt summarize has no argument 'colour'"),
            (b'/prompt summarize topic="the weather', b"A quote is not closed"),
            (b"/prompt nope", b"There is no prompt named 'nope' here. Prompts: hello, summarize."),
        ]
        for typed, told in mistakes:
            at = await term.expect(PROMPT, after=at)
            term.type(typed + b"\r")
            at = await term.expect(told, after=at)
            if typed.startswith(b"/prompt summarize"):
                at = await term.expect(b" Write it as /prompt summarize topic=\xe2\x80\xa6 [tone=", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    assert model.requests == [], "a prompt that was not started asks the model nothing"
    assert "Traceback" not in term.screen()


async def test_a_started_prompt_is_shown_then_answered_as_a_turn_with_its_text(tmp_path):
    script = [reply("Mild, as ever."), reply("Welding joins metal."), reply("Hello!")]
    async with (
        FakeLLMServer(script) as model,
        terminal(*nerve("chat"), env=env_for(tmp_path, model)) as term,
    ):
        at = await term.expect(PROMPT)
        term.type(b'/prompt summarize topic="the weather" tone=dry\r')
        at = await term.expect(f"prompt summarize: {WEATHER}".encode(), after=at)
        at = await term.expect(b"Mild, as ever.", after=at)

        at = await term.expect(PROMPT, after=at)
        term.type(b"/prompt summarize welding\r")  # a value without a name fills topic
        at = await term.expect(b"prompt summarize: Summarize what you know about welding.", after=at)
        at = await term.expect(b"Welding joins metal.", after=at)

        at = await term.expect(PROMPT, after=at)
        term.type(b"/prompt hello\r")
        at = await term.expect(b"prompt hello: Say hello to the person.", after=at)
        at = await term.expect(b"Hello!", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
        model.assert_complete()
    asked = [question(request) for request in model.requests]
    assert asked == [WEATHER, "Summarize what you know about welding.", "Say hello to the person."]
    assert "Traceback" not in term.screen()

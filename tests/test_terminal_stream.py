"""Live answers in the terminal: words on the screen while the model still writes, tool calls as lines.

nerve runs as a person runs it (a pseudo-terminal, or pipes for scripts) against the local fake model
service. The model holds back the end of its answer (`stall_after`) until the test has seen the
first words, so "shown before the model finished" is an ordering, not a race.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from adapters.terminal.live import PlainAnswer, TurnSoFar
from bot.types import Ask, ConversationKey, SignInNeeded, TurnEvent
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, tool_reply
from tests.fakes.screen import Screen
from tests.test_cli import SEED_QUESTION, servers_file
from tests.test_terminal import PROMPT, chat_env, nerve, terminal

ANSWER = "Hello there, the air in A1001 is fine today."
# The role chunk, then "Hell", "o th", "ere,": the rest waits until the test lets it go.
SHOWN_FIRST = "Hello there,"
HELD = {"chunk_chars": 4, "stall_after": 4, "stall": 240.0}
# How long the first words may take to appear: a margin for a busy machine (a process start there
# can take ten seconds and more); the model holds the rest far longer, until the test lets it go.
FIRST_WORDS_WITHIN = 90.0
LOOP = {
    "command": sys.executable,
    "args": ["-m", "tests.mcp_servers.loop"],
    "cwd": str(ROOT),
    "trustAnnotations": True,
}


def no_tools(tmp_path: Path) -> str:
    return str(servers_file(tmp_path, {}))


def wait_call(label: str, delay_ms: int, call_id: str) -> FakeCall:
    return FakeCall(
        name="wait_and_echo", arguments=json.dumps({"label": label, "delay_ms": delay_ms}), id=call_id
    )


def shows(columns: int, *texts: str):  # type: ignore[no-untyped-def]
    """A check for `Terminal.until`: every text is on the screen (not just somewhere in the bytes)."""

    def check(output: bytes) -> bool:
        screen = Screen.of(output, columns).text()
        return all(text in screen for text in texts)

    return check


def rows(output: bytes, columns: int, word: str) -> list[str]:
    return [line for line in Screen.of(output, columns).lines() if word in line]


@contextlib.asynccontextmanager
async def piped(*args: str, env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *nerve(*args),
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def read_until(stream: asyncio.StreamReader, text: str, *, within: float) -> bytes:
    """What `stream` sent up to and including `text`; fails when it does not come in time."""
    seen = b""
    try:
        async with asyncio.timeout(within):
            while text.encode() not in seen:
                piece = await stream.read(4096)
                if not piece:
                    break
                seen += piece
    except TimeoutError:
        pass
    assert text.encode() in seen, f"{text!r} was not written in time; so far: {seen.decode(errors='replace')}"
    return seen


# --- the chat -------------------------------------------------------------------------------------


async def test_the_chat_shows_the_first_words_while_the_model_is_still_writing(tmp_path):
    async with FakeLLMServer([reply(ANSWER, **HELD)]) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=no_tools(tmp_path))
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"How is the air?\r")
            await term.until(shows(220, SHOWN_FIRST), "the first words", within=FIRST_WORDS_WITHIN)
            assert "fine today" not in Screen.of(term.output, 220).text(), "the model has not sent it yet"
            model.unstall()
            at = await term.expect(b"fine today.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    assert rows(term.output, 220, "fine today.") == [ANSWER], "once, whole, and nothing left of the live view"


async def test_a_chat_on_a_pipe_writes_the_answer_as_plain_text_while_the_model_is_still_writing(tmp_path):
    async with FakeLLMServer([reply(ANSWER, **HELD)]) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=no_tools(tmp_path))
        async with piped("chat", env=env) as process:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(b"How is the air?\n")
            await process.stdin.drain()
            seen = await read_until(process.stdout, SHOWN_FIRST, within=FIRST_WORDS_WITHIN)
            assert b"fine today" not in seen
            model.unstall()
            process.stdin.write(b"/quit\n")
            process.stdin.close()
            rest, err = await asyncio.wait_for(process.communicate(), 60)
        model.assert_complete()
    assert process.returncode == 0, err
    out = (seen + rest).decode()
    # A line of its own (not after the prompt, as if typed there), exactly the answer: no padding.
    assert ANSWER in out.splitlines(), out


async def test_parallel_calls_show_one_line_each_that_turns_from_running_to_done(tmp_path):
    script = [
        tool_reply(wait_call("fast", 1500, "call_fast"), wait_call("slow", 3000, "call_slow")),
        reply("Both waited."),
    ]
    async with FakeLLMServer(script) as model:
        config = str(servers_file(tmp_path, {"loop": LOOP}))
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=config)
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"wait twice\r")

            def running(count: int, done: int):  # type: ignore[no-untyped-def]
                def check(output: bytes) -> bool:
                    lines = rows(output[at:], 220, "wait_and_echo")
                    return (
                        sum("running" in line for line in lines) == count
                        and sum("✓" in line for line in lines) == done
                        and len(lines) == count + done
                    )

                return check

            await term.until(running(2, 0), "both calls running, one line each")
            await term.until(running(1, 1), "the fast call done, the slow one still running")
            at = await term.expect(b"Both waited.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()
    final = rows(term.output, 220, "wait_and_echo")
    assert len(final) == 2 and all("✓" in line and " ms" in line for line in final), final
    assert not rows(term.output, 220, "running"), "no running line is left behind"


async def test_a_new_round_drops_the_draft_the_model_wrote_next_to_its_calls(tmp_path):
    draft = "Let me look that up first."
    script = [
        tool_reply(wait_call("a", 1500, "call_a"), content=draft),
        reply("The answer is 42.", **HELD),
    ]
    async with FakeLLMServer(script) as model:
        config = str(servers_file(tmp_path, {"loop": LOOP}))
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=config)
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"what is the answer?\r")
            await term.until(shows(220, draft, "running"), "the draft next to the running call")
            await term.until(shows(220, "The answer"), "the next round's first words")
            assert draft not in Screen.of(term.output, 220).text(), "the draft is gone"
            model.unstall()
            at = await term.expect(b"42.", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        model.assert_complete()


async def test_nothing_breaks_in_a_40_column_terminal(tmp_path):
    async with terminal(*nerve("chat"), env=chat_env(tmp_path), columns=40) as term:
        at = await term.expect(PROMPT)
        term.type(SEED_QUESTION.encode() + b"\r")
        at = await term.expect(b"/show N", after=at)
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    lines = Screen.of(term.output, 40).lines()
    summaries = [line for line in lines if "▸ [" in line]
    assert len(summaries) == 2, lines
    for line in summaries:
        # One line each, cut to the width with an ellipsis rather than wrapped onto the next.
        assert " ms" in line and line.endswith("…"), line
    assert not [line for line in lines if "thinking" in line or "running" in line], lines
    assert "Traceback" not in term.screen()


# --- one-shot questions ---------------------------------------------------------------------------


async def test_ask_writes_the_answer_to_stdout_while_the_model_is_still_writing(tmp_path):
    async with FakeLLMServer([reply(ANSWER, **HELD)]) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=no_tools(tmp_path))
        async with piped("ask", "How is the air?", env=env) as process:
            assert process.stdout is not None
            seen = await read_until(process.stdout, SHOWN_FIRST, within=FIRST_WORDS_WITHIN)
            assert b"fine today" not in seen
            model.unstall()
            rest, err = await asyncio.wait_for(process.communicate(), 60)
        model.assert_complete()
    assert process.returncode == 0, err
    assert (seen + rest).decode() == ANSWER + "\n", "the answer alone, no padding and no hint"


async def test_ask_keeps_stdout_for_the_answer_and_sends_hints_and_progress_to_stderr(tmp_path):
    async with piped("ask", SEED_QUESTION, env=chat_env(tmp_path)) as process:
        out, err = (b.decode() for b in await asyncio.wait_for(process.communicate(), 90))
    assert process.returncode == 0, err
    assert "AQI" in out
    assert "offline model" not in out and "/show" not in out and "get_environment_status" not in out
    assert all(line == line.rstrip() for line in out.splitlines()), "no padding to 80 columns"
    assert "offline model" in err, "the hint goes to stderr"
    for tool in ("get_environment_status", "simulate_geolocation"):
        assert any(tool in line and " ms" in line for line in err.splitlines()), err
    assert "/show" not in err, "nothing to expand in one-shot mode"


async def test_ask_json_prints_one_object_and_nothing_while_it_streams(tmp_path):
    async with FakeLLMServer([reply(ANSWER, chunk_chars=4)]) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=no_tools(tmp_path))
        async with piped("ask", "--json", "How is the air?", env=env) as process:
            out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err
    assert json.loads(out)["text"] == ANSWER
    assert err == b""


async def test_ask_on_a_cut_stream_writes_what_came_once_and_then_the_cut_off_note(tmp_path):
    async with FakeLLMServer([reply(ANSWER, chunk_chars=4, cut_after=4)]) as model:
        env = chat_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=no_tools(tmp_path))
        async with piped("ask", "How is the air?", env=env) as process:
            out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err
    first, blank, note, *rest = out.decode().split("\n")
    assert (first, blank, rest) == (SHOWN_FIRST, "", [""]), out
    assert note.startswith("⚠️ The answer was cut off"), out


# --- plain output, piece by piece -----------------------------------------------------------------


async def test_plain_output_ends_a_draft_line_and_writes_the_next_rounds_answer_below_it():
    out, notes = io.StringIO(), io.StringIO()
    answer = PlainAnswer(out, notes)
    for event in (
        TurnEvent(kind="thinking", message="thinking…"),
        TurnEvent(kind="text", message="Let me "),
        TurnEvent(kind="text", message="check."),
        TurnEvent(kind="tool_started", message="", tool="lookup", tool_call_id="c1"),
        TurnEvent(kind="tool_finished", message="", tool="lookup", tool_call_id="c1", ok=False),
        TurnEvent(kind="thinking", message="thinking…"),
        TurnEvent(kind="text", message="It is \x1b[2J42."),
    ):
        await answer.progress(event)
    answer.finish("It is \x1b[2J42.")
    assert out.getvalue() == "Let me check.\nIt is \\x1b[2J42.\n"
    assert notes.getvalue().splitlines()[0] == "  ▸ lookup…"
    assert notes.getvalue().splitlines()[1].startswith("  ✗ lookup ") and notes.getvalue().endswith(" ms\n")


async def test_plain_output_writes_a_final_text_that_differs_from_the_streamed_one_on_its_own_line():
    out = io.StringIO()
    answer = PlainAnswer(out)
    await answer.progress(TurnEvent(kind="text", message="A draft"))
    answer.finish("I stopped after 8 rounds of tool calls.")
    assert out.getvalue() == "A draft\nI stopped after 8 rounds of tool calls.\n"


def _progress(message: str, fraction: float | None) -> TurnEvent:
    return TurnEvent(
        kind="tool_progress", message=message, tool="slow_count", tool_call_id="c1", fraction=fraction
    )


def test_a_running_calls_line_shows_what_its_server_last_reported():
    turn = TurnSoFar(clock=lambda: 10.0)
    turn.apply(TurnEvent(kind="tool_started", message="", tool="slow_count", tool_call_id="c1"))
    turn.apply(_progress("step 1 of 3", 1 / 3))
    assert turn.call_line(turn.calls["c1"], "⠋").plain == "  ⠋ slow_count  running 0 ms — step 1 of 3 (33%)"
    turn.apply(_progress("copying \x1b[2Jfiles", None))
    assert turn.call_line(turn.calls["c1"], "⠋").plain.endswith("— copying \\x1b[2Jfiles")
    turn.apply(TurnEvent(kind="tool_finished", message="", tool="slow_count", tool_call_id="c1", ok=True))
    assert "step" not in turn.call_line(turn.calls["c1"], "⠋").plain and "copying" not in turn.status


async def test_plain_output_notes_a_calls_progress_on_its_own_line():
    out, notes = io.StringIO(), io.StringIO()
    answer = PlainAnswer(out, notes)
    await answer.progress(TurnEvent(kind="tool_started", message="", tool="slow_count", tool_call_id="c1"))
    await answer.progress(_progress("step 3 of 3", 1.0))
    assert notes.getvalue().splitlines()[1] == "  … slow_count: step 3 of 3 (100%)"
    assert out.getvalue() == ""


def _sign_in_ask() -> Ask:
    key = ConversationKey(platform="terminal", workspace="alice", channel="cli", thread="t")
    needed = SignInNeeded(server="notes", person="alice", url="http://127.0.0.1/authorize", state="s1")
    return Ask.of_sign_in(needed, key, expires_at=0.0)


async def test_what_a_turn_asks_is_no_status_in_the_live_view_and_a_sign_in_is_one_line_of_plain_output():
    """The terminal asks for itself what a turn asks (`fill_in`, `sign_in`): its views keep only the
    statuses; `nerve ask`, which cannot take a sign-in, says what the turn waits for, once."""
    turn = TurnSoFar()
    out, notes = io.StringIO(), io.StringIO()
    answer = PlainAnswer(out, notes)
    for event in (
        TurnEvent(kind="ask", message="Connect notes to go on", ask=_sign_in_ask()),
        TurnEvent(kind="ask_done", message="expired", ask=_sign_in_ask()),
    ):
        turn.apply(event)
        await answer.progress(event)
    assert turn.status == "thinking…"
    assert notes.getvalue() == "  Connect notes to go on\n"
    assert out.getvalue() == ""

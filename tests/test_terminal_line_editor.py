"""The chat's prompt on a terminal, driven through prompt_toolkit's own input pipe.

Keys go in as a terminal sends them (escape sequences, bracketed pastes) and the prompt answers what a
person would have meant: the tests run the real `PromptSession`, only its input and output are pipes.
"""

from __future__ import annotations

import asyncio
import io
import stat
from collections.abc import Iterator

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.data_structures import Size
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.vt100 import Vt100_Output

from adapters.terminal.chat import COMMANDS
from adapters.terminal.line_editor import SlashCompleter, TerminalPrompt, history_file

LEFT = "\x1b[D"
UP = "\x1b[A"
ESC_ENTER = "\x1b\r"


def paste(text: str) -> str:
    return f"\x1b[200~{text}\x1b[201~"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        yield pipe


async def test_arrow_keys_move_the_cursor_instead_of_going_into_the_question(keys, tmp_path):
    ask = TerminalPrompt(history=tmp_path / "nerve.history")
    keys.send_text("hello wrld" + LEFT * 3 + "o\r")
    assert await ask("you › ") == "hello world"


async def test_a_pasted_block_is_one_question_and_enter_sends_it(keys):
    ask = TerminalPrompt()
    keys.send_text(paste("first line\r\nsecond line\nthird line") + "\r")
    assert await ask("you › ") == "first line\nsecond line\nthird line"


async def test_esc_enter_starts_a_new_line_and_enter_sends(keys):
    ask = TerminalPrompt()
    keys.send_text("one" + ESC_ENTER + "two\r")
    assert await ask("you › ") == "one\ntwo"


async def test_up_recalls_the_questions_of_an_earlier_chat_from_the_history_file(keys, tmp_path):
    path = history_file(tmp_path / "nerve.db")
    assert path == tmp_path / "nerve.history"
    first = TerminalPrompt(history=path)
    keys.send_text("what is the weather\r")
    assert await first("you › ") == "what is the weather"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # questions are for their owner's eyes

    again = TerminalPrompt(history=path)  # a new chat in the same directory
    keys.send_text(UP + "\r")
    assert await again("you › ") == "what is the weather"


async def test_a_paste_over_the_limit_is_refused_with_the_limit_and_the_line_is_kept(keys, capsys):
    ask = TerminalPrompt(max_chars=100)
    keys.send_text("short " + paste("x" * 2_000) + "\r")
    assert await ask("you › ") == "short "
    said = capsys.readouterr().out
    assert "2,006 characters; the limit is 100" in said
    assert "The paste was not added." in said


async def test_ctrl_d_and_ctrl_c_at_the_prompt_answer_none(keys):
    ask = TerminalPrompt()
    keys.send_text("\x04")
    assert await ask("you › ") is None
    keys.send_text("half typed\x03")
    assert await ask("you › ") is None


async def test_a_question_withdrawn_while_asked_leaves_the_prompt_usable(keys):
    ask = TerminalPrompt()
    asking = asyncio.create_task(ask("Colour: "))
    await asyncio.sleep(0)  # let the prompt start
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    keys.send_text("next\r")
    assert await ask("you › ") == "next"


async def typed_until(ask: TerminalPrompt, expected: str) -> None:
    """Completion runs in the background: wait (bounded) until the line reads `expected`."""
    buffer = ask._session.default_buffer
    changed = asyncio.Event()
    buffer.on_text_changed += lambda _: changed.set()
    async with asyncio.timeout(30):
        while buffer.text != expected:
            await changed.wait()
            changed.clear()


async def complete(ask: TerminalPrompt, keys: PipeInput, typed: str, expected: str) -> str | None:
    asking = asyncio.create_task(ask("you › "))
    keys.send_text(typed + "\t")
    await typed_until(ask, expected)
    keys.send_text("\r")
    return await asking


async def test_tab_completes_commands_and_the_names_of_prompts(keys):
    ask = TerminalPrompt(completer=SlashCompleter(COMMANDS, lambda: ["greet", "summarise"]))
    assert await complete(ask, keys, "/pro", "/prompt") == "/prompt"
    assert await complete(ask, keys, "/prompt gr", "/prompt greet") == "/prompt greet"


def test_only_commands_and_prompt_names_are_completed():
    completer = SlashCompleter(COMMANDS, lambda: ["greet", "summarise"])

    def offered(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert offered("/re") == ["/reset"]
    assert offered("/prompt ") == ["greet", "summarise"]
    assert offered("hello /pro") == []  # not a command
    assert offered("/show 1") == []


async def test_ctrl_r_finds_an_earlier_question_by_a_word_of_it(keys, tmp_path):
    path = tmp_path / "nerve.history"
    for question in ("what is the weather in Lyon", "list my notes", "who am I at notes"):
        keys.send_text(question + "\r")
        assert await TerminalPrompt(history=path)("you › ") == question

    ask = TerminalPrompt(history=path)
    # Ctrl-R, a word of the question, Enter to take the match, Enter to send it.
    keys.send_text("\x12" + "weath" + "\r" + "\r")
    assert await ask("you › ") == "what is the weather in Lyon"


class Screen(io.StringIO):
    """A terminal's screen as prompt_toolkit writes to it; `erased` is set when it is cleared whole."""

    def __init__(self) -> None:
        super().__init__()
        self.erased = asyncio.Event()

    def write(self, text: str) -> int:
        if "\x1b[2J" in text:  # erase the whole screen: a prompt alone never sends it
            self.erased.set()
        return super().write(text)


def test_ctrl_l_clears_the_screen_and_keeps_the_line_being_typed():
    screen = Screen()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=80), term="xterm")
    with create_pipe_input() as keys, create_app_session(input=keys, output=output):
        keys.send_text("hello" + "\x0c")

        async def typed() -> str | None:
            answer = asyncio.ensure_future(TerminalPrompt()("you › "))
            await screen.erased.wait()
            keys.send_text(" world\r")
            return await answer

        assert asyncio.run(asyncio.wait_for(typed(), 30)) == "hello world"

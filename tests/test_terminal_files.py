"""Files shared from the terminal: `/attach` in the chat, a path typed alone on a line, `nerve ask --file`.

The chat runs in-process on the real runtime (offline model, no servers) with its keys through
prompt_toolkit's own input pipe, so what it hands the core (`Incoming.files`) is seen as handed; the
path offer also runs on a pseudo-terminal as a person meets it, and off one (piped stdin), where
nothing is offered. The fetch reads the real file.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from adapters.terminal.chat import COMMANDS, TerminalChat, help_text
from adapters.terminal.files import local_file, pasted_path, read_within
from adapters.terminal.line_editor import SlashCompleter
from bot.config import Settings
from bot.errors import FileTooBig, FileUnreadable
from bot.runtime import Runtime, open_runtime
from bot.types import AgentReply, ChatMessage, Incoming, Progress
from tests.test_cli import nerve_env, run_nerve
from tests.test_terminal import PROMPT, chat_env, nerve, terminal
from tests.test_terminal_repl import stored


async def stored_questions(tmp_path: Path, thread: str) -> list[ChatMessage]:
    return [m for m in await stored(tmp_path, thread) if m.role == "user"]


CSV = b"name,team,city\nada,core,london\ngrace,navy,arlington\n"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.csv"
    path.write_bytes(CSV)
    return path


# --- the file itself --------------------------------------------------------------------------------


async def test_a_local_file_is_described_at_once_and_fetched_whole_within_the_limit(notes):
    file = local_file(str(notes))
    assert (file.name, file.size, file.mime, file.ref) == ("notes.csv", len(CSV), "text/csv", str(notes))
    assert await file.fetch(1024) == CSV
    assert await file.fetch(len(CSV)) == CSV  # exactly at the limit is within it


async def test_a_path_with_a_tilde_is_the_home_folders(notes, monkeypatch):
    monkeypatch.setenv("HOME", str(notes.parent))
    file = local_file("~/notes.csv")
    assert file.ref == str(notes)
    assert await file.fetch(1024) == CSV


async def test_a_file_over_the_limit_is_refused_from_its_size_without_being_read(tmp_path, monkeypatch):
    huge = tmp_path / "dump.log"
    with huge.open("wb") as out:
        out.truncate(5 * 1024**3)  # 5 GB declared, no disk used: reading it would take minutes

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was opened")

    file = local_file(str(huge))
    monkeypatch.setattr(Path, "open", no_reading)
    with pytest.raises(FileTooBig) as refused:
        await file.fetch(20 * 1024 * 1024)
    assert refused.value.message == "dump.log is 5 GB; the limit is 20 MB."


def test_a_file_that_grew_past_the_limit_after_its_size_was_read_is_still_refused(notes, monkeypatch):
    class Shrunk:
        st_size = 3

    real_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: Shrunk() if self == notes else real_stat(self, **kw))
    with pytest.raises(FileTooBig, match=r"notes\.csv is over 10 bytes"):
        read_within(notes, 10)


async def test_a_missing_a_folder_or_a_file_gone_since_is_one_plain_line(tmp_path, notes):
    with pytest.raises(FileUnreadable) as missing:
        local_file(str(tmp_path / "nope.csv"))
    assert missing.value.message == f"No file at {tmp_path / 'nope.csv'}."
    with pytest.raises(FileUnreadable, match="is a folder"):
        local_file(str(tmp_path))
    file = local_file(str(notes))
    notes.unlink()
    with pytest.raises(FileUnreadable, match=r"notes\.csv is gone"):
        await file.fetch(1024)


def test_a_line_is_a_path_only_when_it_is_exactly_that_of_an_existing_file(tmp_path):
    spaced = tmp_path / "my notes.csv"
    spaced.write_bytes(CSV)
    assert pasted_path(f"  {spaced}  ") == str(spaced)
    assert pasted_path(f"'{spaced}'") == str(spaced)  # dropped into a terminal: quoted
    assert pasted_path(str(spaced).replace(" ", "\\ ")) == str(spaced)  # or with its spaces escaped
    assert pasted_path(f"what is in {spaced}?") is None
    assert pasted_path(f"{spaced}\n{spaced}") is None
    assert pasted_path(str(tmp_path)) is None  # a folder
    assert pasted_path(str(tmp_path / "gone.csv")) is None


def test_tab_completes_the_path_after_attach(tmp_path):
    (tmp_path / "notes.csv").write_bytes(CSV)
    completer = SlashCompleter(COMMANDS, lambda: [])
    typed = f"/attach {tmp_path}/no"
    offered = [c.text for c in completer.get_completions(Document(typed), CompleteEvent())]
    assert offered == ["tes.csv"]


def test_the_help_lists_attach():
    assert "/attach [PATH|clear]" in help_text()


# --- the chat, in-process, with its keys through prompt_toolkit's pipe -------------------------------


class Screen(io.StringIO):
    """What the chat prints; a write wakes whoever waits for a line."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.changed.set()
        return super().write(text)

    async def shows(self, text: str, *, after: int = 0) -> int:
        """Wait (bounded) until `text` is printed past `after`; where it ends."""
        try:
            async with asyncio.timeout(30):
                while (found := self.getvalue().find(text, after)) < 0:
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"{text!r} never printed; the screen:\n{self.getvalue()}") from None
        return found + len(text)


class TTY:
    """Standard input as a person's terminal: the chat offers what it offers only there."""

    def isatty(self) -> bool:
        return True


@dataclass
class Chat:
    keys: PipeInput
    screen: Screen
    asked: list[Incoming] = field(default_factory=list)
    fetched: list[list[bytes]] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    async def say(self, keys: str, then: str) -> None:
        at = len(self.screen.getvalue())
        self.keys.send_text(keys)
        await self.screen.shows(then, after=at)

    async def ask(self, question: str) -> Incoming:
        self.answered.clear()
        self.keys.send_text(question + "\r")
        async with asyncio.timeout(30):
            await self.answered.wait()
        return self.asked[-1]


@pytest.fixture
def settings(tmp_path, monkeypatch) -> Iterator[Settings]:
    for name in [n for n in os.environ if n.startswith(("OPENAI_", "NERVE_"))]:
        monkeypatch.delenv(name)
    for name, value in chat_env(tmp_path, servers={}).items():
        monkeypatch.setenv(name, value)
    yield Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture
async def chat(settings, monkeypatch) -> AsyncIterator[Chat]:
    monkeypatch.setattr(sys, "stdin", TTY())
    screen = Screen()
    console = Console(file=screen, force_terminal=True, color_system=None, width=200, highlight=False)
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        rig = Chat(keys, screen)
        async with open_runtime(settings) as runtime:
            record(runtime, rig)
            running = asyncio.create_task(TerminalChat(runtime, "files", console=console).run())
            await screen.shows("/help for commands")
            yield rig
            keys.send_text("/quit\r")
            async with asyncio.timeout(30):
                await running


def record(runtime: Runtime, rig: Chat) -> None:
    """Each message the chat hands the core, and its files' bytes as the core would fetch them."""
    reply = runtime.agent.reply

    async def recorded(incoming: Incoming, progress: Progress) -> AgentReply:
        rig.asked.append(incoming)
        rig.fetched.append([await file.fetch(1024 * 1024) for file in incoming.files])
        try:
            return await reply(incoming, progress)
        finally:
            rig.answered.set()

    runtime.agent.reply = recorded  # type: ignore[method-assign]


async def test_attached_files_go_with_the_next_question_only(chat, notes, tmp_path):
    other = tmp_path / "more.json"
    other.write_bytes(b'{"a": 1}')
    await chat.say(f"/attach {notes}\r", "Attached notes.csv (52 bytes)")
    await chat.say(f"/attach {other}\r", "Attached more.json (8 bytes)")
    incoming = await chat.ask("what columns?")
    assert incoming.text == "what columns?"
    assert [f.name for f in incoming.files] == ["notes.csv", "more.json"]
    assert chat.fetched[-1] == [CSV, b'{"a": 1}']
    assert "With notes.csv (52 bytes), more.json (8 bytes)." in chat.screen.getvalue()

    assert (await chat.ask("and now?")).files == ()  # sent once, then cleared
    await chat.say("/attach\r", "Nothing attached.")


async def test_attach_alone_lists_and_clear_forgets_them(chat, notes):
    await chat.say(f"/attach {notes}\r", "Attached notes.csv")
    await chat.say(f"/attach {notes}\r", "Attached notes.csv")  # once, not twice
    at = len(chat.screen.getvalue())
    await chat.say("/attach\r", "/attach clear forgets them.")
    listing = chat.screen.getvalue()[at:]
    assert listing.count("notes.csv (52 bytes)") == 1 and str(notes) in listing
    await chat.say("/attach clear\r", "Cleared 1 attachment.")
    assert (await chat.ask("what columns?")).files == ()


async def test_attaching_a_missing_file_says_so_in_one_line_and_attaches_nothing(chat, tmp_path):
    await chat.say(f"/attach {tmp_path / 'nope.csv'}\r", f"No file at {tmp_path / 'nope.csv'}.")
    assert (await chat.ask("anything?")).files == ()


async def test_a_line_that_is_a_path_is_offered_as_an_attachment(chat, notes):
    chat.keys.send_text(f"{notes}\r")
    await chat.say("\r", "Attached: it goes with your next question.")  # Enter: yes
    incoming = await chat.ask("what columns?")
    assert [f.name for f in incoming.files] == ["notes.csv"]
    assert chat.fetched[-1] == [CSV]


async def test_a_declined_offer_asks_the_line_as_typed(chat, notes):
    chat.keys.send_text(f"{notes}\r")
    incoming = await chat.ask("n")
    assert (incoming.text, incoming.files) == (str(notes), ())


# --- the chat as a person and a script meet it ---------------------------------------------------------


async def test_on_a_terminal_a_pasted_path_is_offered_and_taken(tmp_path, notes):
    env = chat_env(tmp_path, servers={})
    async with terminal(*nerve("chat", "--thread", "offer"), env=env) as term:
        at = await term.expect(PROMPT)
        term.type(str(notes).encode() + b"\r")
        at = await term.expect(b"Attach notes.csv (52 bytes) to your next question? [Y/n]", after=at)
        term.type(b"y\r")
        at = await term.expect(PROMPT, after=at)
        term.type(b"what columns?\r")
        at = await term.expect(b"With notes.csv (52 bytes).", after=at)
        at = await term.expect(b"ada,core,london", after=at)  # the offline model read its first lines
        await term.expect(PROMPT, after=at)
        term.type(b"/quit\r")
        assert await term.exit_code() == 0
    [question] = await stored_questions(tmp_path, "offer")
    assert question.content.startswith("what columns?")  # the path was not a question
    assert len(question.files) == 1


async def test_off_a_terminal_a_path_is_a_question_as_typed_and_attach_works(tmp_path, notes):
    env = nerve_env(tmp_path, servers={}, HOME=str(tmp_path))
    lines = "~/notes.csv\n/attach ~/notes.csv\nwhat columns?\n"
    code, out, err = await run_nerve("chat", "--thread", "piped", env=env, stdin=lines)
    assert code == 0, err
    assert "to your next question?" not in out + err  # nothing offered: nobody to answer
    offered, asked = await stored_questions(tmp_path, "piped")
    assert (offered.content, offered.files) == ("~/notes.csv", ())
    assert asked.content.startswith("what columns?") and len(asked.files) == 1
    assert "Attached notes.csv (52 bytes)" in out and "ada,core,london" in out


# --- nerve ask --file ------------------------------------------------------------------------------------


async def test_ask_with_a_missing_file_exits_2_before_any_model_call(tmp_path, notes):
    env = nerve_env(tmp_path, servers={}, OPENAI_BASE_URL="http://127.0.0.1:9", OPENAI_API_KEY="k")
    code, out, err = await run_nerve("ask", "--file", str(notes), "--file", "missing.csv", "hi", env=env)
    assert code == 2
    assert err.strip() == "nerve: No file at missing.csv."
    assert out == ""
    assert not (tmp_path / "nerve.db").exists()  # nothing was opened, let alone asked


async def test_ask_takes_each_file_given_with_the_question(settings, notes, tmp_path, monkeypatch, capsys):
    from adapters import cli
    from bot.agent import Agent

    other = tmp_path / "more.json"
    other.write_bytes(b'{"a": 1}')
    asked: list[tuple[Incoming, list[bytes]]] = []
    reply = Agent.reply

    async def recorded(self: Agent, incoming: Incoming, progress: Progress) -> AgentReply:
        asked.append((incoming, [await file.fetch(1024) for file in incoming.files]))
        return await reply(self, incoming, progress)

    monkeypatch.setattr(Agent, "reply", recorded)
    args = cli.parse_args(["ask", "--file", str(notes), "--file", str(other), "what columns?"])
    assert await cli._job(args, settings, lambda: None, asyncio.Event())(settings) == 0
    [(incoming, fetched)] = asked
    assert incoming.text == "what columns?"
    assert [f.name for f in incoming.files] == ["notes.csv", "more.json"]
    assert fetched == [CSV, b'{"a": 1}']
    assert capsys.readouterr().out.strip()  # answered


async def test_ask_about_a_file_with_the_offline_model_answers_with_its_name_and_first_lines(tmp_path, notes):
    code, out, err = await run_nerve(
        "ask", "--file", str(notes), "what columns?", env=nerve_env(tmp_path, servers={})
    )
    assert code == 0, err
    assert "notes.csv" in out
    assert "name,team,city" in out and "ada,core,london" in out


async def test_ask_says_once_which_file_was_not_read_and_answers_about_the_rest(tmp_path, notes):
    big = tmp_path / "big.log"
    with big.open("wb") as out:
        out.truncate(30 * 1024 * 1024)
    code, out, err = await run_nerve(
        "ask", "--file", str(big), "--file", str(notes), "what columns?", env=nerve_env(tmp_path, servers={})
    )
    assert code == 0, err
    assert out.count("big.log (30.0 MB): not read") == 1, out  # written once, after the answer
    assert out.count("name,team,city") == 1, out

"""The chat's prompt on a terminal: line editing, history, search, completion and pastes.

Not `input()`: there arrow keys arrive as escape sequences, a line is cut at 4,095 characters and a
pasted block becomes one question per line."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from bot.text import question_too_long, scrub

# Shown at the start of each line after the first of a question of several lines.
CONTINUATION = "   … "


def history_file(database: Path) -> Path:
    """The prompt's history beside the database (`nerve.db` → `nerve.history`): one per nerve directory."""
    return database.with_suffix(".history")


class SlashCompleter(Completer):
    """Tab completes `/commands`, after `/prompt ` the prompts offered here (asked anew each time),
    and after `/attach ` the path of a file (`~` too)."""

    def __init__(self, commands: Sequence[str], prompt_names: Callable[[], Iterable[str]]) -> None:
        self._commands = commands
        self._prompt_names = prompt_names
        self._paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or "\n" in typed:
            return
        command, space, rest = typed.partition(" ")
        if not space:
            candidates, word = list(self._commands), command
        elif command == "/prompt" and " " not in rest:
            candidates, word = sorted(set(self._prompt_names())), rest
        elif command == "/attach":
            yield from self._paths.get_completions(Document(rest), complete_event)
            return
        else:
            return
        for candidate in candidates:
            if candidate.startswith(word) and candidate != word:
                yield Completion(candidate, start_position=-len(word))


def _private_history(path: Path) -> History:
    """A history file only its owner reads (questions hold anything); in memory where none can be made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


def _key_bindings(max_chars: int | None) -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        """Esc-Enter (Alt-Enter): a new line within the question; Enter alone sends it."""
        event.current_buffer.insert_text("\n")

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        """A paste is one piece of text; one over the limit is refused whole, never cut short."""
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        buffer = event.current_buffer
        size = len(buffer.text) + len(data)
        if max_chars is not None and size > max_chars:
            message = question_too_long(size, max_chars) + " The paste was not added."
            run_in_terminal(lambda: print(message))
            return
        buffer.insert_text(data)

    return bindings


class TerminalPrompt:
    """One answer at a terminal; None on Ctrl-C or Ctrl-D; `max_chars` refuses a paste too long to ask."""

    def __init__(
        self, *, history: Path | None = None, completer: Completer | None = None, max_chars: int | None = None
    ) -> None:
        self._session: PromptSession[str] = PromptSession(
            history=_private_history(history) if history is not None else InMemoryHistory(),
            completer=completer,
            complete_while_typing=False,
            key_bindings=_key_bindings(max_chars),
            prompt_continuation=CONTINUATION,
        )

    async def __call__(self, prompt: str) -> str | None:
        try:
            # The chat handles SIGINT itself (Ctrl-C while a turn runs); at the prompt, Ctrl-C is a key.
            text = await self._session.prompt_async(prompt, handle_sigint=False, set_exception_handler=False)
        except (KeyboardInterrupt, EOFError):
            return None
        return scrub(text)

"""The offline model on shared files: it names each file the question came with (name, type, size,
what it holds) and shows its first lines, so sharing a file shows something without a model service.

It reads the blocks the core puts in a message for each file (`bot.files.fit`): a header line
`[file f_…: name · type · size · summary]` and the file's text after it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.text.turn_note import split_note
from bot.types import ChatMessage, ToolSpec
from bot.types.files import NOT_READ

_HEADER = re.compile(r"^\[file (f_[0-9a-zA-Z]+): (.+)\]$")
# The file tools' names: the offline model answers from what it was given, it never pages.
TOOL_NAMES = frozenset({"read_attachment", "search_attachment"})
_FIRST_LINES = 5
_LINE_CHARS = 160
_ASKS_ABOUT_A_FILE = re.compile(
    r"\b(file|attachment|attached|csv|pdf|document|image|screenshot|picture|photo|log)s?\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Block:
    id: str
    about: list[str]
    lines: list[str]


def is_file_tool(tool: ToolSpec) -> bool:
    return tool.name in TOOL_NAMES


def blocks(text: str) -> list[Block]:
    """The files' blocks in a message, in order."""
    found: list[Block] = []
    for line in text.splitlines():
        if match := _HEADER.match(line.strip()):
            # A file the core could not read is named in the reply's notice, not described here.
            if match.group(2) != NOT_READ:
                found.append(Block(match.group(1), match.group(2).split(" · "), []))
        elif found and line.strip() and not _is_note(line):
            found[-1].lines.append(line)
    return found


def _is_note(line: str) -> bool:
    """A line the core adds about a file (where the rest is, that an image is attached), not its text."""
    stripped = line.strip()
    return (stripped.startswith("[") and stripped.endswith("]")) or (
        stripped.startswith("(") and stripped.endswith(")")
    )


def files_answer(question: str, messages: Sequence[ChatMessage]) -> str | None:
    """An answer about the files of the latest question, or of the conversation when the question asks
    about a file; None when there are none to speak of."""
    latest = next((m for m in reversed(messages) if m.role == "user"), None)
    # The turn's note (the time, memories) ends the message: it is no file's text.
    found = blocks(split_note(latest.content or "")[0]) if latest is not None else []
    if not found and _ASKS_ABOUT_A_FILE.search(question):
        earlier = [b for m in messages if m.role == "user" for b in blocks(split_note(m.content or "")[0])]
        found = earlier[-1:]
    if not found:
        return None
    return "\n\n".join(_describe(block) for block in found)


def _describe(block: Block) -> str:
    name, *rest = block.about
    what = ", ".join(part for part in rest if part)
    head = f"You shared **{name}** ({what}), file id `{block.id}`." if what else f"You shared **{name}**."
    if not block.lines:
        return f"{head} I'm the offline model: I can't see images or describe them."
    shown = [line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…" for line in block.lines]
    first = "\n".join(shown[:_FIRST_LINES])
    return f"{head} Its first lines:\n```\n{first}\n```"

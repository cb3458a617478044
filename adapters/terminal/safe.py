"""Text from outside made harmless for a terminal, which obeys control sequences (ESC clears the
screen, OSC 52 writes the clipboard): `printable` shows them as visible escapes."""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from bot.text import scrub, show_link_targets

if TYPE_CHECKING:  # `printable` is used by every command; only the answers need rich's Markdown
    from rich.markdown import Markdown

# C0 controls except tab and newline, DEL, and the C1 controls (U+009B is a one-character CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What `json.dumps(ensure_ascii=False)` leaves raw inside strings: DEL and the C1 controls.
_JSON_RAW_CONTROL = re.compile(r"[\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with control characters other than newline and tab made visible, never obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", scrub(text).replace("\r\n", "\n"))


def say(text: str, stream: TextIO | None = None) -> None:
    """Outside text as one line of a command's output (stdout unless `stream`), never obeyed."""
    (stream or sys.stdout).write(printable(text) + "\n")


def shown(text: str) -> str:
    """Outside text ready for a rich markup string: harmless bytes, brackets escaped."""
    from rich.markup import escape  # rich only where something is drawn: not every command draws

    return escape(printable(text))


def terminal_json(value: Any) -> str:
    """`value` as indented JSON whose strings carry no raw control character or lone surrogate
    (DEL and C1, left raw by the encoder, only occur inside strings: `\\u` escapes keep them exact)."""
    text = scrub(json.dumps(value, ensure_ascii=False, indent=2))
    return _JSON_RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def answer_markdown(text: str) -> Markdown:
    """Model-written Markdown, links shown as `text (target)`: rich's OSC 8 link would hide the target."""
    from rich.markdown import Markdown

    return Markdown(show_link_targets(printable(text)), hyperlinks=False)

"""What a terminal shows after it obeyed some output: enough of a VT100 to read a live display.

The pseudo-terminal tests see bytes; a live region is drawn, moved over and drawn again, so the bytes
hold every frame. `Screen` replays them the way a terminal does (wrapping at its width, carriage
return, cursor up and down, erasing lines) and keeps what is left: the screen a person reads.
Styles, cursor visibility and window titles change nothing here and are skipped. The screen grows
downwards without limit (it is also the scrollback); the cursor never moves above its top line.
"""

from __future__ import annotations

import re

from rich.cells import cell_len

# CSI: ESC [ parameters intermediates final; OSC: ESC ] … BEL or ST; other two-byte escapes.
_CSI = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ESC = re.compile(r"\x1b[@-Z\\-_]")


class Screen:
    """`Screen(columns).feed(text)`, then `lines()`: every row as a person sees it."""

    def __init__(self, columns: int) -> None:
        self.columns = columns
        self._rows: list[list[str]] = [[]]
        self._row = 0
        self._col = 0

    @classmethod
    def of(cls, output: bytes, columns: int) -> Screen:
        screen = cls(columns)
        screen.feed(output.decode("utf-8", "replace"))
        return screen

    def lines(self) -> list[str]:
        """The rows, trailing blanks trimmed, without the empty rows below the last written one."""
        rows = ["".join(cell for cell in row if cell).rstrip() for row in self._rows]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def text(self) -> str:
        return "\n".join(self.lines())

    def feed(self, text: str) -> None:
        at = 0
        while at < len(text):
            char = text[at]
            if char == "\x1b":
                at = self._escape(text, at)
                continue
            if char == "\r":
                self._col = 0
            elif char == "\n":
                self._down(1)
            elif char == "\b":
                self._col = max(0, self._col - 1)
            elif char == "\t":
                self._col = min(self.columns - 1, (self._col // 8 + 1) * 8)
            elif char >= " ":
                self._put(char)
            at += 1

    # --- the parts of a terminal a live display uses ------------------------------------------------

    def _escape(self, text: str, at: int) -> int:
        for pattern in (_CSI, _OSC, _ESC):
            match = pattern.match(text, at)
            if match is None:
                continue
            if pattern is _CSI:
                self._csi(match.group(1), match.group(2))
            return match.end()
        return at + 1

    def _csi(self, params: str, final: str) -> None:
        if params.startswith("?"):
            return  # private modes: cursor visibility, bracketed paste, …
        numbers = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        n = numbers[0] if numbers else 0
        if final == "A":
            self._row = max(0, self._row - max(1, n))
        elif final == "B":
            self._down(max(1, n))
        elif final == "C":
            self._col = min(self.columns - 1, self._col + max(1, n))
        elif final == "D":
            self._col = max(0, self._col - max(1, n))
        elif final == "G":
            self._col = min(self.columns - 1, max(1, n) - 1)
        elif final == "K":
            row = self._line()
            if n == 0:
                del row[self._col :]
            elif n == 1:
                for i in range(min(self._col + 1, len(row))):
                    row[i] = " "
            else:
                row.clear()
        elif final == "J" and n in (0, 2, 3):
            if n == 0:
                del self._line()[self._col :]
                del self._rows[self._row + 1 :]
            else:
                self._rows = [[]]
                self._row = self._col = 0

    def _line(self) -> list[str]:
        while len(self._rows) <= self._row:
            self._rows.append([])
        return self._rows[self._row]

    def _down(self, n: int) -> None:
        self._row += n
        self._line()

    def _put(self, char: str) -> None:
        width = cell_len(char)
        if width == 0:
            return
        if self._col + width > self.columns:  # the terminal wraps before the character that does not fit
            self._col = 0
            self._down(1)
        row = self._line()
        while len(row) < self._col + width:
            row.append(" ")
        row[self._col] = char
        for extra in range(1, width):
            row[self._col + extra] = ""  # the right half of a wide character
        self._col += width

"""What one check found, and how the report is written: a line each for people, JSON for scripts.
Every text passes a `Redactor` first: a reason may quote a URL or a header holding a secret.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from adapters.terminal.safe import printable

Status = Literal["ok", "warning", "error"]
# Values shorter than this are left alone: `1` or `true` in a server's env are not secrets, and
# hiding them would blank out unrelated words.
MIN_SECRET = 6
HIDDEN = "[hidden]"


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome: what it found and, for a warning or an error, what to do about it."""

    status: Status
    name: str
    found: str
    todo: str | None = None


def ok(name: str, found: str) -> Check:
    return Check("ok", name, found)


def warning(name: str, found: str, todo: str) -> Check:
    return Check("warning", name, found, todo)


def error(name: str, found: str, todo: str) -> Check:
    return Check("error", name, found, todo)


def schema_news(before: int | None, version: int) -> str:
    """What opening the store did to its schema (None before: there was none), for the database line."""
    if before is None:
        return "created now, "
    return f"migrated now from {before}, " if before < version else ""


class Redactor:
    """Replaces every secret nerve was given wherever it appears in a text, longest first."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, HIDDEN)
        return text

    def check(self, check: Check) -> Check:
        """The check with its texts on one line, made printable, and without secrets."""

        def clean(text: str) -> str:
            return " ".join(printable(self(text)).split())

        todo = None if check.todo is None else clean(check.todo)
        return Check(check.status, clean(check.name), clean(check.found), todo)


def line(check: Check, width: int) -> str:
    """`error    model         what was found → what to do`: one check, one line."""
    text = f"{check.status:<8} {check.name:<{width}}  {check.found}"
    return f"{text} → {check.todo}" if check.todo else text

"""Local files shared with a question at the terminal: `/attach PATH`, a pasted path, `nerve ask --file`.

A file here is a path on this machine: it is looked at (stat) when attached, so a typo is said at
once, and read only when the core asks for it, within its limit, off the event loop.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import shlex
import stat
from pathlib import Path

from bot.errors import FileTooBig, FileUnreadable
from bot.types import SharedFile

# A line longer than this is a question, never a path someone pasted.
LONGEST_PATH = 4096


def short_size(count: int) -> str:
    """`12 KB`: a size as people say it when they decide whether to share a file."""
    if count < 1024:
        return f"{count} byte{'s' if count != 1 else ''}"
    if count < 1024**2:
        return f"{max(1, round(count / 1024))} KB"
    for unit, size in (("MB", 1024**2), ("GB", 1024**3)):
        if count < 1024 * size or unit == "GB":
            return f"{count / size:.1f}".removesuffix(".0") + f" {unit}"
    raise AssertionError("unreachable")


def described(file: SharedFile) -> str:
    """`notes.csv (12 KB)`."""
    return file.name if file.size is None else f"{file.name} ({short_size(file.size)})"


def local_file(written: str) -> SharedFile:
    """The file at the path as written (`~` expanded, relative to the working directory), looked at
    now; `FileUnreadable` with a one-line reason when there is no readable file there."""
    path = Path(written).expanduser()
    try:
        found = path.stat()
    except FileNotFoundError:
        raise FileUnreadable(f"No file at {written}.") from None
    except OSError as exc:
        raise FileUnreadable(f"Cannot read {written}: {exc.strerror or exc}.") from None
    if stat.S_ISDIR(found.st_mode):
        raise FileUnreadable(f"{written} is a folder: attach the files in it one by one.")
    if not stat.S_ISREG(found.st_mode):
        raise FileUnreadable(f"{written} is not a regular file.")
    if not os.access(path, os.R_OK):
        raise FileUnreadable(f"Cannot read {written}: permission denied.")
    absolute = path.resolve()
    mime, _ = mimetypes.guess_type(absolute.name)

    async def fetch(max_bytes: int) -> bytes:
        return await asyncio.to_thread(read_within, absolute, max_bytes)

    return SharedFile(name=absolute.name, fetch=fetch, size=found.st_size, mime=mime, ref=str(absolute))


def read_within(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, at most `max_bytes`: its size is looked at first, so a file over the limit is
    refused unread; one that grew since is cut off at the limit and refused too."""
    limit = f"the limit is {short_size(max_bytes)}"
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise FileTooBig(f"{path.name} is {short_size(size)}; {limit}.")
        with path.open("rb") as opened:
            data = opened.read(max_bytes + 1)
    except FileNotFoundError:
        raise FileUnreadable(f"{path.name} is gone: {path} no longer exists.") from None
    except OSError as exc:
        raise FileUnreadable(f"Cannot read {path.name}: {exc.strerror or exc}.") from None
    if len(data) > max_bytes:
        raise FileTooBig(f"{path.name} is over {short_size(max_bytes)}; {limit}.")
    return data


def pasted_path(line: str) -> str | None:
    """The path a line is, when it is exactly one to an existing file: typed, or pasted or dropped
    by a terminal (quoted, or with its spaces escaped); None for anything else."""
    text = line.strip()
    if not text or "\n" in text or len(text) > LONGEST_PATH:
        return None
    candidates = [text]
    if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
        candidates.append(text[1:-1])
    elif "\\" in text:
        try:
            words = shlex.split(text)
        except ValueError:
            words = []
        if len(words) == 1:
            candidates.append(words[0])
    for candidate in candidates:
        try:
            if Path(candidate).expanduser().is_file():
                return candidate
        except (OSError, ValueError):  # a name too long, a NUL: not a path
            continue
    return None


def paths_written(argument: str) -> list[str]:
    """The paths of `/attach a.csv "my notes.txt"`: the whole argument when it is one existing path
    (spaces and all), else its words, quoted as a shell would."""
    whole = pasted_path(argument)
    if whole is not None:
        return [whole]
    try:
        return shlex.split(argument)
    except ValueError:  # an unclosed quote: take it as written
        return [argument.strip()]


class Attachments:
    """The files attached for the next question; taken (and so cleared) when it is asked."""

    def __init__(self) -> None:
        self._files: list[SharedFile] = []

    def add(self, file: SharedFile) -> None:
        """Attach `file`; the same file attached again replaces the first (its size as it is now)."""
        self._files = [f for f in self._files if f.ref != file.ref]
        self._files.append(file)

    def listed(self) -> tuple[SharedFile, ...]:
        return tuple(self._files)

    def clear(self) -> int:
        """Forget them all; how many there were."""
        count = len(self._files)
        self._files = []
        return count

    def take(self) -> tuple[SharedFile, ...]:
        """The files for the question being asked, which no later question gets."""
        taken = tuple(self._files)
        self._files = []
        return taken

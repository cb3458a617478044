"""Taking in the files shared with a message: named in the message before any byte is fetched, then
checked against the limits, fetched within them, read (`bot.files.read`) and kept with the conversation.

The message is stored first with one line per file made from what its platform said of it (name,
type, size), so nothing is lost when a fetch or a parse fails; a file that cannot be read is named in
a plain notice (which file, which limit or why), and the turn goes on with what could be read.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bot.errors import FileRefused, FileTooBig
from bot.files.fit import size_text
from bot.files.read import FileLimits, read_file
from bot.types import Incoming, Progress, TurnEvent
from bot.types.files import SharedFile, StoredFile

logger = logging.getLogger(__name__)

MB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRules:
    """How much of what people share is read (NERVE_MAX_FILE_MB, NERVE_MAX_FILES,
    NERVE_MAX_TURN_FILES_MB), and how far a file is parsed (`FileLimits`: pixels, pages, seconds)."""

    max_file_bytes: int = 20 * MB
    max_files: int = 10
    max_turn_bytes: int = 50 * MB
    limits: FileLimits = field(default_factory=FileLimits)
    # Seconds one file's download may take: the turn holds its conversation meanwhile.
    fetch_seconds: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Intake:
    """What came of a message's files: those read (and kept), and a notice for each one that was not."""

    read: tuple[StoredFile, ...] = ()
    notices: tuple[str, ...] = ()


def file_ids(incoming: Incoming) -> tuple[str, ...]:
    """An id per shared file. A delivery with an id gets the same ids every time it comes (a message
    answered again after a restart finds the files it read before); one without gets fresh ones."""
    ids = []
    for index, shared in enumerate(incoming.files):
        if incoming.event_id:
            seed = f"{incoming.key}|{incoming.event_id}|{index}|{shared.name}".encode()
            ids.append("f_" + hashlib.sha256(seed).hexdigest()[:10])
        else:
            ids.append("f_" + secrets.token_hex(5))
    return tuple(ids)


# A listing line as `listing` writes it, to tell what a person wrote from the lines nerve added.
LISTING = re.compile(r"^\[attached file f_\w+: .*\]$", re.MULTILINE)


def written(content: str) -> str:
    """A stored message's text without its listing lines: what its person wrote."""
    return LISTING.sub("", content).strip()


def listing(shared: SharedFile, file_id: str) -> str:
    """The line a message keeps for a shared file, from its platform's description alone."""
    about = [shared.mime or "type unknown"]
    if shared.size is not None:
        about.append(size_text(shared.size))
    return f"[attached file {file_id}: {shared.name} ({', '.join(about)})]"


def with_listing(incoming: Incoming, ids: Sequence[str]) -> str:
    """The message as stored: its text, then a line per shared file."""
    lines = [listing(shared, file_id) for shared, file_id in zip(incoming.files, ids, strict=True)]
    return "\n\n".join(part for part in (incoming.text, "\n".join(lines)) if part)


Keep = Callable[[StoredFile], Awaitable[None]]
Known = Callable[[str], Awaitable[StoredFile | None]]


async def take_in(
    files: Sequence[SharedFile],
    ids: Sequence[str],
    rules: FileRules,
    *,
    keep: Keep,
    known: Known,
    progress: Progress,
) -> Intake:
    """Read each file within the limits and `keep` it; a file `known` already (the same message
    delivered again) is not fetched again. Every refusal is also told through `progress` at once."""
    read: list[StoredFile] = []
    notices: list[str] = []
    fetched = 0
    for index, (shared, file_id) in enumerate(zip(files, ids, strict=True)):
        if (found := await known(file_id)) is not None:
            read.append(found)
            continue
        if index >= rules.max_files:
            refusal = f"{shared.name}: not read, a message may carry {rules.max_files} files at most"
        else:
            try:
                stored = await _read_one(shared, file_id, rules, rules.max_turn_bytes - fetched)
            except FileRefused as exc:
                refusal = exc.message
            else:
                fetched += stored.size
                await keep(stored)
                read.append(stored)
                continue
        notice = f"⚠️ {refusal}"
        notices.append(notice)
        await progress(TurnEvent(kind="notice", message=notice))
    return Intake(read=tuple(read), notices=tuple(notices))


async def _read_one(shared: SharedFile, file_id: str, rules: FileRules, turn_left: int) -> StoredFile:
    """Fetch within the per-file limit and what the turn has left, then read; `FileRefused` saying
    which file and which limit or reason, never a traceback."""
    per_file = f"larger than the {size_text(rules.max_file_bytes)} limit per file (NERVE_MAX_FILE_MB)"
    per_turn = (
        f"past the {size_text(rules.max_turn_bytes)} the files of one message may take in all"
        " (NERVE_MAX_TURN_FILES_MB)"
    )
    if shared.size is not None and shared.size > rules.max_file_bytes:
        raise FileRefused(f"{shared.name} ({size_text(shared.size)}): not read, {per_file}")
    allowed = min(rules.max_file_bytes, turn_left)
    if allowed <= 0 or (shared.size is not None and shared.size > allowed):
        raise FileRefused(f"{shared.name}: not read, {per_turn}")
    why = per_file if allowed == rules.max_file_bytes else per_turn
    try:
        async with asyncio.timeout(rules.fetch_seconds):
            data = await shared.fetch(allowed)
    except TimeoutError:
        raise FileRefused(f"{shared.name}: could not be fetched within {rules.fetch_seconds:g} s") from None
    except FileTooBig:
        raise FileRefused(f"{shared.name}: not read, {why}") from None
    except FileRefused as exc:
        raise FileRefused(f"{shared.name}: could not be fetched ({exc.message})") from None
    except Exception:
        logger.exception("fetching the shared file %s (%s) failed", shared.name, shared.ref)
        raise FileRefused(f"{shared.name}: could not be fetched from its platform") from None
    if len(data) > allowed:  # a front end that read past the limit it was given
        raise FileRefused(f"{shared.name} ({size_text(len(data))}): not read, {why}")
    try:
        return await read_file(file_id, shared.name, shared.mime, data, limits=rules.limits)
    except FileRefused:
        raise
    except Exception:
        logger.exception("reading the shared file %s failed", shared.name)
        raise FileRefused(f"{shared.name}: could not be read (the file looks damaged)") from None

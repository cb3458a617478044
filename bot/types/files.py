"""Files people share with a message: what a front end hands the core, and what the core keeps.

Its own module because both ends speak in these: a front end knows a file's name, size and how to
fetch its bytes (a platform's file URL, a local path), while only the core reads them,
within its limits, and keeps what the model may read again (`bot.files`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

# How a file is read: an image is shown to a model that can see; text and PDF text are read as text.
FileKind = Literal["image", "text", "pdf"]

# What a request says of a shared file that was not read (its notice says why): `[file f_…: not read]`.
NOT_READ = "not read"

# Fetches a shared file's bytes, reading at most `max_bytes` (the core's per-file limit): a front end
# raises `FileTooBig` when the file is longer, `FileUnreadable` when its platform would not give it.
Fetch = Callable[[int], Awaitable[bytes]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedFile:
    """A file shared with a message, as its platform describes it; its bytes are fetched only when the
    core reads it, so a message over a limit costs no download."""

    name: str
    fetch: Fetch
    # As the platform reports them (None when it does not): a size over the limit is refused unread.
    size: int | None = None
    mime: str | None = None
    # The platform's own id for the file (an id, a URL or a path), for the logs.
    ref: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredFile:
    """A shared file as the core kept it, with its conversation: the text the model may page through
    (`read_attachment`), and for an image its scaled copy (metadata stripped), never the raw bytes."""

    id: str
    name: str
    kind: FileKind
    mime: str
    # Bytes as shared.
    size: int
    # The whole extracted text (text files, PDF text); "" for an image.
    text: str = ""
    # A line about its shape: a CSV's header and row count, a JSON's top-level keys, an image's
    # pixel size, a PDF's page count.
    summary: str = ""
    # An image re-encoded and scaled down for the model (PNG or JPEG, as `image_mime` says).
    image: bytes | None = None
    image_mime: str | None = None

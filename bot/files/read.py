"""Reading a shared file's bytes into what nerve keeps of it (`StoredFile`), or a plain refusal.

The one door into `bot.files`: it sniffs what the bytes are, hands them to the reader for that type
in a worker thread (decoding a big image or PDF would stall every other conversation on the event
loop), and turns every failure into `FileRefused` naming the file and what nerve does read. Pure: no
store, no model, no front end; the caller gives the id and keeps the result.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from bot.errors import FileRefused
from bot.files.images import ImageRefused, read_image
from bot.files.pdf import PdfRefused, read_pdf
from bot.files.sniff import sniff
from bot.files.text import NotText, read_text
from bot.types.files import StoredFile

logger = logging.getLogger(__name__)

SUPPORTED = (
    "nerve reads images (PNG, JPEG, GIF, WebP), text files (plain text, Markdown, CSV, JSON, YAML, "
    "source code, logs) and PDFs"
)
NUL = "\x00"
# A file name as it appears in a message: a name can be anything its sharer typed.
_NAME_CHARS = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class FileLimits:
    """What reading one file may cost. The byte size is the caller's limit (it fetches the bytes)."""

    # Declared pixels past which an image is a decompression bomb (50 MP: a phone's full photo fits).
    # Pillow refuses past twice its own `Image.MAX_IMAGE_PIXELS` (179 MP) whatever this says.
    max_image_pixels: int = 50_000_000
    # The long side an image is scaled down to: what vision models work at without scaling it again.
    image_side: int = 1568
    # Pages of a PDF whose text is read, and the time reading may take (checked between pages).
    pdf_pages: int = 200
    pdf_seconds: float = 10.0
    # The time reading any one file may take in all, the turn waiting: past it the file is refused
    # and the turn goes on (one crafted PDF page can take longer than the checks between pages see).
    read_seconds: float = 30.0


async def read_file(
    file_id: str, name: str, mime: str | None, data: bytes, *, limits: FileLimits = FileLimits()
) -> StoredFile:
    """What nerve keeps of the file `name` with bytes `data` (`mime`: the platform's type, trusted
    least); raises `FileRefused` with a message naming the file, for the person who shared it."""
    try:
        async with asyncio.timeout(limits.read_seconds):
            stored = await asyncio.to_thread(read_file_sync, file_id, name, mime, data, limits)
    except TimeoutError:
        # The worker thread cannot be stopped; its result is dropped when it ends.
        logger.warning("file %s not read within %g s", file_id, limits.read_seconds)
        shown = display_name(name)
        raise FileRefused(
            f"{shown}: reading it took longer than {limits.read_seconds:g} s; {SUPPORTED}."
        ) from None
    return stored


def read_file_sync(file_id: str, name: str, mime: str | None, data: bytes, limits: FileLimits) -> StoredFile:
    """`read_file` on the calling thread (for callers already off the event loop)."""
    stored = _read(file_id, name, mime, data, limits)
    # A NUL may pass as text (a log, a PDF's text): PostgreSQL's text columns refuse it.
    return replace(
        stored,
        name=stored.name.replace(NUL, ""),
        text=stored.text.replace(NUL, ""),
        summary=stored.summary.replace(NUL, ""),
    )


def _read(file_id: str, name: str, mime: str | None, data: bytes, limits: FileLimits) -> StoredFile:
    shown = display_name(name)
    if not data:
        raise FileRefused(f"{shown}: the file is empty.")
    found = sniff(name, mime, data)
    try:
        if found.sort == "refused":
            raise FileRefused(f"{shown}: it is {found.what}, which nerve does not open; {SUPPORTED}.")
        if found.sort == "pdf":
            pdf = read_pdf(data, max_pages=limits.pdf_pages, max_seconds=limits.pdf_seconds)
            return StoredFile(
                id=file_id,
                name=name,
                size=len(data),
                kind="pdf",
                mime="application/pdf",
                text=pdf.text,
                summary=pdf.summary,
            )
        if found.sort == "text":
            decoded = read_text(name, mime, data)
            return StoredFile(
                id=file_id,
                name=name,
                size=len(data),
                kind="text",
                mime=decoded.mime,
                text=decoded.text,
                summary=decoded.summary,
            )
        scaled = read_image(found.sort, data, max_pixels=limits.max_image_pixels, long_side=limits.image_side)
        return StoredFile(
            id=file_id,
            name=name,
            size=len(data),
            kind="image",
            mime=f"image/{found.sort}",
            summary=scaled.summary,
            image=scaled.data,
            image_mime=scaled.mime,
        )
    except (ImageRefused, PdfRefused) as why:
        raise FileRefused(f"{shown}: {why}.") from None
    except NotText:
        raise FileRefused(f"{shown}: it is binary data, not text; {SUPPORTED}.") from None
    except FileRefused:
        raise
    except Exception as error:  # a parser failing on hostile or odd input: a refusal, not a crash
        logger.warning("file %s not read: %s: %s", file_id, type(error).__name__, error, exc_info=True)
        raise FileRefused(f"{shown}: nerve could not read it (it may be damaged); {SUPPORTED}.") from None


def display_name(name: str) -> str:
    """A file's name fit for one line of a message: control characters gone, long names cut."""
    flat = "".join(char if char.isprintable() else " " for char in name).strip() or "(unnamed file)"
    return flat if len(flat) <= _NAME_CHARS else flat[: _NAME_CHARS - 1] + "…"

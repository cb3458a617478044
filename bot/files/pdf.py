"""PDF text, page by page, within a page cap and a time cap.

A PDF is a program of sorts: a small file can hold thousands of pages or a page whose content takes
minutes to lay out. The caps are checked between pages (a page pypdf is working on cannot be stopped
from outside its thread), and what was read by then is kept with a note of where reading stopped,
rather than nothing. Encrypted and damaged files get a plain reason, never pypdf's exception text.
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypdf import PdfReader

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PdfText:
    text: str
    summary: str


class PdfRefused(Exception):
    """Why a PDF is not read, in words for the person who shared it (without the file's name)."""


def read_pdf(data: bytes, *, max_pages: int, max_seconds: float) -> PdfText:
    """The text of the PDF in `data`, each page under a `[page N]` line; raises `PdfRefused`."""
    # pypdf loads with the first PDF read, never at start-up (`nerve ask` loads no file reader).
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    started = time.monotonic()
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _unlocked(reader):
            raise PdfRefused("it is protected by a password; share a copy without one")
        pages = len(reader.pages)
    except PdfRefused:
        raise
    except (FileNotDecryptedError, DependencyError):
        raise PdfRefused(
            "it is encrypted in a way nerve cannot open; share a copy without protection"
        ) from None
    except Exception as error:  # pypdf raises many types on malformed input; none is worth a traceback
        logger.info("PDF not read: %s: %s", type(error).__name__, error)
        raise PdfRefused("it is not a PDF nerve can read (damaged or incomplete?)") from None
    if pages == 0:
        raise PdfRefused("it has no pages")
    parts: list[str] = []
    read = 0
    stopped = ""
    for number in range(1, pages + 1):
        if number > max_pages:
            stopped = f"text of the {_first(read)} only (nerve reads up to {max_pages:,})"
            break
        if number > 1 and time.monotonic() - started > max_seconds:
            stopped = f"text of the {_first(read)} only (reading stopped after {max_seconds:g} s)"
            break
        parts.append(f"[page {number}]\n{_page_text(reader, number)}".rstrip())
        read = number
    text = "\n\n".join(parts)
    if not any(line.strip() and not line.startswith("[page ") for line in text.split("\n")):
        raise PdfRefused("it has no text to read (a scan?); nerve reads the text of PDFs, not their pictures")
    summary = f"PDF, {pages:,} page{'s' if pages != 1 else ''}"
    return PdfText(text=text, summary=f"{summary}, {stopped}" if stopped else summary)


def _first(pages: int) -> str:
    return "first page" if pages == 1 else f"first {pages:,} pages"


def _unlocked(reader: PdfReader) -> bool:
    """Many PDFs are encrypted only against editing, with an empty password to open them."""
    from pypdf.errors import PyPdfError

    try:
        return bool(reader.decrypt(""))
    except (PyPdfError, NotImplementedError):
        return False


def _page_text(reader: PdfReader, number: int) -> str:
    try:
        return reader.pages[number - 1].extract_text() or ""
    except Exception as error:  # one bad page should not cost the others
        logger.info("PDF page %d not read: %s: %s", number, type(error).__name__, error)
        return "(this page could not be read)"

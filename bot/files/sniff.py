"""What a shared file is, from its first bytes before its name: a name or a platform's type can lie
(a `.txt` that is a program, a screenshot saved as `.jpg` that is a PNG), the bytes cannot.

Only classifies; `bot.files.read` decides what to do with each answer. The types nerve refuses are
named here too, so a refusal can say what the file is ("a ZIP archive") rather than "unsupported".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

# What a file is read as; "refused" carries a description of what it is.
Sort = Literal["png", "jpeg", "gif", "webp", "pdf", "text", "refused"]


@dataclass(frozen=True, slots=True)
class Sniffed:
    sort: Sort
    # For a refused file, what it is, for the message ("a ZIP archive", "a Word document").
    what: str = ""


# Magic numbers, checked at the very start of the file.
_IMAGES: tuple[tuple[bytes, Sort], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)
_REFUSED_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"PK\x07\x08", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"\x7fELF", "a program"),
    (b"\xfe\xed\xfa\xce", "a program"),
    (b"\xfe\xed\xfa\xcf", "a program"),
    (b"\xce\xfa\xed\xfe", "a program"),
    (b"\xcf\xfa\xed\xfe", "a program"),
    (b"\xca\xfe\xba\xbe", "a program"),
    (b"\x00asm", "a program"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Office document"),
    (b"SQLite format 3\x00", "a database"),
    (b"OggS", "an audio file"),
    (b"fLaC", "an audio file"),
    (b"\x1a\x45\xdf\xa3", "a video"),
)

# By name, for what the bytes did not settle (and to say which Office document a ZIP is).
_OFFICE = {
    ".docx": "a Word document",
    ".doc": "a Word document",
    ".odt": "a text document",
    ".rtf": "a Word document",
    ".xlsx": "a spreadsheet",
    ".xls": "a spreadsheet",
    ".ods": "a spreadsheet",
    ".numbers": "a spreadsheet",
    ".pptx": "a presentation",
    ".ppt": "a presentation",
    ".odp": "a presentation",
    ".pages": "a document",
    ".epub": "an e-book",
}
_ARCHIVES = {
    ".zip",
    ".tar",
    ".gz",
    ".tgz",
    ".bz2",
    ".xz",
    ".7z",
    ".rar",
    ".zst",
    ".jar",
    ".apk",
    ".iso",
    ".dmg",
}
_PROGRAMS = {".exe", ".dll", ".so", ".dylib", ".bin", ".msi", ".deb", ".rpm", ".class", ".wasm", ".pyc", ".o"}
_OTHER_IMAGES = {".bmp", ".tif", ".tiff", ".heic", ".heif", ".avif", ".ico", ".psd", ".raw", ".cr2", ".nef"}


def suffix(name: str) -> str:
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def sniff(name: str, mime: str | None, data: bytes) -> Sniffed:
    """What `data` is read as: the bytes decide first, then the name's extension, then the mime type
    (the least trusted: platforms guess it from the name too). Unknown bytes are tried as text."""
    head = data[:64]
    for magic, sort in _IMAGES:
        if head.startswith(magic):
            return Sniffed(sort)
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return Sniffed("webp")
    # A PDF may have a few bytes of junk before its header; readers look in the first kilobyte.
    if b"%PDF-" in data[:1024]:
        return Sniffed("pdf")
    ext = suffix(name)
    for magic, what in _REFUSED_MAGIC:
        if head.startswith(magic):
            # Word, Excel and PowerPoint files are ZIP (or OLE) containers: say which.
            return Sniffed("refused", _OFFICE.get(ext, what))
    # Magic numbers a text could start with ("MZ", "BZh", "ID3"), checked with what follows them.
    if head.startswith(b"MZ") and b"\x00" in head:
        return Sniffed("refused", "a program")
    if head.startswith(b"BZh") and head[4:10] == b"1AY&SY":
        return Sniffed("refused", "a bzip2 archive")
    if head.startswith(b"ID3") and head[3:4] in {b"\x02", b"\x03", b"\x04"}:
        return Sniffed("refused", "an audio file")
    if head[4:8] == b"ftyp":
        return Sniffed(
            "refused",
            "an image type nerve does not read" if ext in _OTHER_IMAGES else "an audio or video file",
        )
    if len(data) > 262 and data[257:262] == b"ustar":
        return Sniffed("refused", "a tar archive")
    return _by_name(ext, (mime or "").split(";")[0].strip().lower())


def _by_name(ext: str, mime: str) -> Sniffed:
    if ext in _OFFICE:
        return Sniffed("refused", _OFFICE[ext])
    if ext in _ARCHIVES:
        return Sniffed("refused", "an archive")
    if ext in _PROGRAMS:
        return Sniffed("refused", "a program")
    if ext == ".pdf" or mime == "application/pdf":
        # Without a PDF header pypdf will most likely say it is broken, in plain words.
        return Sniffed("pdf")
    if ext in _OTHER_IMAGES or (mime.startswith("image/") and mime != "image/svg+xml"):
        return Sniffed("refused", "an image type nerve does not read")
    if mime.startswith(("audio/", "video/")):
        return Sniffed("refused", "an audio file" if mime.startswith("audio/") else "an audio or video file")
    if mime.startswith("application/vnd.openxmlformats") or mime.startswith("application/vnd.ms-"):
        return Sniffed("refused", "an Office document")
    return Sniffed("text")

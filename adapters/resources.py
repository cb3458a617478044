"""Showing the links, texts and files a tool returned, the same way on every surface. A server names
its resources itself, so only `http(s)` links become clickable, labelled with the host they really
lead to."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, urlsplit, urlunsplit

from bot.text.render import truncate
from bot.types import Attachment, Resource

NAME_SHOWN = 100  # characters of a resource's name shown in a link or a title
URI_SHOWN = 300  # characters of a non-web URI shown as text
# Characters a web link keeps as they are; anything else (spaces, quotes, `<>|()` and backticks
# that markup would read, non-ASCII) is percent-encoded, so no surface can misread where it ends.
_URL_SAFE = ":/?#@!$&'*+,;=%-._~"


@dataclass(frozen=True, slots=True)
class WebLink:
    """A link people may click: the exact URL to open, and the host to show next to its name."""

    url: str
    host: str


def _readable_host(hostname: str) -> str | None:
    """The host as it really is: lower case, an internationalised name in its `xn--` form so a
    look-alike letter cannot pass for another site; None when it is not a host name at all."""
    host = hostname.lower().rstrip(".")
    if not host or any(unicodedata.category(c)[0] in "CZ" for c in host):
        return None
    return host if host.isascii() else _idna(host)


def _idna(host: str) -> str | None:
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


def link_host(url: str) -> str:
    """The host a link leads to, with its port and ASCII form: a look-alike host cannot hide."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return url
    ascii_host = host if host.isascii() else (_idna(host) or host)
    shown = host if ascii_host == host else f"{host} ({ascii_host})"
    return f"{shown}:{port}" if port is not None else shown


def web_link(uri: str) -> WebLink | None:
    """The link to offer for `uri`, or None to show it as text: only `http`/`https` with a host, and
    never one with a user name (`https://bank@evil`) or control characters, which exist to mislead."""
    if any(unicodedata.category(c) == "Cc" for c in uri):
        return None
    try:
        parts = urlsplit(uri.strip())
        hostname = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not hostname or "@" in parts.netloc:
        return None
    if (host := _readable_host(hostname)) is None:
        return None
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port is None else f"{shown}:{port}"
    path, query, fragment = (
        quote(part, safe=_URL_SAFE) for part in (parts.path, parts.query, parts.fragment)
    )
    return WebLink(url=urlunsplit((parts.scheme.lower(), netloc, path, query, fragment)), host=netloc)


def display_name(resource: Resource) -> str:
    name = " ".join(resource.name.split()) or resource.uri or "resource"
    return truncate(name, NAME_SHOWN)[0]


def shown_uri(uri: str) -> str:
    """A URI shown as text: one line, capped, with no backtick that could end a code span."""
    flat = "".join(c if unicodedata.category(c)[0] not in "CZ" or c == " " else " " for c in uri)
    return truncate(flat.replace("`", "%60"), URI_SHOWN)[0]


def link_label(resource: Resource, link: WebLink) -> str:
    """`name (host)`: the name the server gave, then where the link really goes."""
    name = display_name(resource)
    if name.lower().rstrip("/") in (link.host, link.url.lower().rstrip("/")):
        return link.host
    return f"{name} ({link.host})"


def size_text(count: int) -> str:
    """`1,234 bytes`: exact, since people compare it with what they expected."""
    return f"{count:,} byte{'s' if count != 1 else ''}"


def file_label(resource: Resource) -> str:
    """`logo.png, image/png, 1,234 bytes`: what a listed file is, without opening it."""
    size = len(resource.data or b"")
    return f"{display_name(resource)}, {resource.mime_type or 'unknown type'}, {size_text(size)}"


def file_name(resource: Resource, taken: set[str], *, extension: str = "") -> str:
    """A safe upload name, unique among `taken` (which it joins), with `extension` when it has none."""
    base = resource.name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).strip("._")[:80] or "file"
    if extension and "." not in cleaned:
        cleaned = f"{cleaned}.{extension}"
    name, n = cleaned, 1
    while name in taken:
        n += 1
        stem, dot, ext = cleaned.rpartition(".")
        name = f"{stem}-{n}.{ext}" if dot and stem else f"{cleaned}-{n}"
    taken.add(name)
    return name


Kind = Literal["link", "text", "file"]


def kind_of(resource: Resource) -> Kind | None:
    """How a resource is shown: a link to open, a text to read, or a file to keep."""
    if resource.link:
        return "link"
    if resource.text is not None:
        return "text"
    return "file" if resource.data is not None else None


def text_extension(resource: Resource) -> str:
    mime = (resource.mime_type or "").split(";", 1)[0].strip().lower()
    return {"text/markdown": "md", "application/json": "json", "text/csv": "csv"}.get(mime, "txt")


def all_files(attachments: Iterable[Attachment]) -> list[tuple[Attachment, int, Resource]]:
    """Every file of a reply with its call and its place among the call's resources, in order."""
    return [(a, i, r) for a in attachments for i, r in enumerate(a.resources) if kind_of(r) == "file"]

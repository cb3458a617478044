"""Files people share on Slack: what an event says of them, and their bytes from Slack's file hosts.

An event carries each file's metadata, or for some shares only its id (`file_access:
check_file_info`): those are completed with `files.info` when the turn starts, never in the ack. The
bytes come from `url_private_download` (or `url_private`) with the bot token as a Bearer header, and
only from Slack's own file host (`files.slack.com`) or the host of a custom `SLACK_API_BASE_URL` (a
local stand-in): a file anywhere else is refused before any request, so the token never leaves Slack,
and a redirect off those hosts is not followed. A declared size over the limit is refused unread, and
a download stops as soon as it passes the limit. Requests go through the Slack client's own aiohttp
session when it has one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from bot.errors import FileTooBig, FileUnreadable
from bot.text import scrub
from bot.types import SharedFile

logger = logging.getLogger(__name__)

# Slack's file host: every `url_private` of a workspace's files points here.
FILE_HOST = URL("https://files.slack.com/")
DEFAULT_API = "https://slack.com/api/"
# What the inbox keeps of each file of an event, so a replayed event still has its files.
KEPT_FIELDS = (
    *("id", "name", "title", "mimetype", "filetype", "size"),
    *("url_private", "url_private_download", "mode", "file_access"),
)
# Redirects followed within the trusted hosts; Slack's own file URLs answer directly.
MAX_REDIRECTS = 3
FETCH_SECONDS = 60.0
CHUNK = 64 * 1024
# Slack answers a file URL with its sign-in page (HTTP 200, HTML) when the token may not read files.
SIGN_IN_PAGE = "text/html"
NEEDS_SCOPE = "the Slack app needs the files:read scope (reinstall it from slack/manifest.*.yaml)"
# A file Slack shows but will not give: deleted, or beyond the free plan's history.
_GONE = {
    "tombstone": "it was deleted",
    "hidden_by_limit": "the workspace's plan hides it",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRef:
    """A shared file as its event describes it: complete, or only an id to ask `files.info` about."""

    id: str
    name: str | None = None
    mime: str | None = None
    size: int | None = None
    url: str | None = None
    # Why Slack will not give it (deleted, hidden), when the event says so.
    gone: str | None = None

    @property
    def complete(self) -> bool:
        return self.gone is not None or (self.name is not None and self.url is not None)


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: Any) -> str | None:
    return scrub(value) if isinstance(value, str) and value else None


def file_ref(raw: Mapping[str, Any]) -> FileRef | None:
    """One entry of an event's (or files.info's) `files`, or None when it has no id."""
    file_id = _text(raw.get("id"))
    if file_id is None:
        return None
    mode = raw.get("mode")
    return FileRef(
        id=file_id,
        name=_text(raw.get("name")) or _text(raw.get("title")),
        mime=_text(raw.get("mimetype")),
        size=_size(raw.get("size")),
        url=_text(raw.get("url_private_download")) or _text(raw.get("url_private")),
        gone=_GONE.get(mode) if isinstance(mode, str) else None,
    )


def file_refs(event: Mapping[str, Any]) -> tuple[FileRef, ...]:
    """The files an event carries, in the order shared."""
    files = event.get("files")
    if not isinstance(files, list):
        return ()
    refs = (file_ref(raw) for raw in files if isinstance(raw, Mapping))
    return tuple(ref for ref in refs if ref is not None)


def kept_files(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An event's files reduced to what a replay needs (no previews, thumbnails, permalinks, shares)."""
    files = event.get("files")
    if not isinstance(files, list):
        return []
    return [
        {name: raw[name] for name in KEPT_FIELDS if name in raw} for raw in files if isinstance(raw, Mapping)
    ]


def megabytes(count: int) -> str:
    return f"{count / 2**20:.1f} MB"


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme, (url.host or "").lower(), url.port)


def trusted_origins(api_base_url: str) -> frozenset[tuple[str, str, int | None]]:
    """Where file bytes may come from: Slack's file host, and a custom SLACK_API_BASE_URL's host."""
    origins = {_origin(FILE_HOST)}
    if api_base_url.rstrip("/") != DEFAULT_API.rstrip("/"):
        origins.add(_origin(URL(api_base_url)))
    return frozenset(origins)


class SlackFiles:
    """Turns an event's file references into `SharedFile`s whose fetch reads Slack's file host."""

    def __init__(self, client: AsyncWebClient, api_base_url: str = DEFAULT_API) -> None:
        self._client = client
        self._trusted = trusted_origins(api_base_url)
        # The client's session when it has one (`nerve slack`), else one of ours, made on first use.
        self._own: aiohttp.ClientSession | None = None

    def trusts(self, url: str) -> bool:
        try:
            parsed = URL(url)
        except ValueError:
            return False
        return parsed.is_absolute() and _origin(parsed) in self._trusted

    async def shared(self, refs: tuple[FileRef, ...]) -> tuple[SharedFile, ...]:
        """The files of a turn, those the event named only by id completed with files.info."""
        completed = await asyncio.gather(*(self._complete(ref) for ref in refs))
        return tuple(self._shared(ref, problem) for ref, problem in completed)

    async def _complete(self, ref: FileRef) -> tuple[FileRef, str | None]:
        """The file's metadata from files.info when the event lacked it; with a reason when Slack refused."""
        if ref.complete:
            return ref, None
        try:
            answer = await self._client.files_info(file=ref.id)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or f"HTTP {exc.response.status_code}")
            logger.warning("Slack refused files.info for %s: %s", ref.id, error)
            scope = f": {NEEDS_SCOPE}" if error == "missing_scope" else ""
            return ref, f"Slack would not describe it ({error}){scope}"
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            logger.warning("files.info for %s failed: %s", ref.id, type(exc).__name__)
            return ref, "Slack could not be reached to describe it"
        raw = answer.get("file")
        info = file_ref(raw) if isinstance(raw, Mapping) else None
        if info is None or info.id != ref.id:
            return ref, "Slack did not describe it"
        return info, None

    def _shared(self, ref: FileRef, problem: str | None) -> SharedFile:
        name = ref.name or f"file {ref.id}"

        async def fetch(max_bytes: int) -> bytes:
            if problem is not None:
                raise FileUnreadable(f"{name}: {problem}")
            return await self._fetch(ref, name, max_bytes)

        return SharedFile(name=name, fetch=fetch, size=ref.size, mime=ref.mime, ref=ref.id)

    async def _fetch(self, ref: FileRef, name: str, max_bytes: int) -> bytes:
        if ref.size is not None and ref.size > max_bytes:
            raise FileTooBig(f"{name} is {megabytes(ref.size)}, over the {megabytes(max_bytes)} limit")
        if ref.gone is not None:
            raise FileUnreadable(f"Slack no longer gives {name}: {ref.gone}")
        if ref.url is None:
            raise FileUnreadable(f"Slack gave no address for {name}")
        try:
            async with asyncio.timeout(FETCH_SECONDS):
                return await self._download(URL(ref.url), ref, name, max_bytes)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            # The exception's text is not passed on: a client error can quote the request.
            logger.warning("downloading Slack file %s failed: %s", ref.id, type(exc).__name__)
            reason = type(exc).__name__
            raise FileUnreadable(f"{name} could not be downloaded from Slack ({reason})") from None

    async def _download(self, url: URL, ref: FileRef, name: str, max_bytes: int) -> bytes:
        session = self._session()
        headers = {"Authorization": f"Bearer {self._client.token or ''}"}
        for _ in range(MAX_REDIRECTS + 1):
            if not self.trusts(str(url)):
                logger.warning("not downloading Slack file %s from %s: not Slack's host", ref.id, url.host)
                raise FileUnreadable(f"{name} is not on Slack's file host ({url.host}), so it was not read")
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                    url = url.join(URL(response.headers["Location"]))
                    continue
                if response.status != 200:
                    scope = f": {NEEDS_SCOPE}" if response.status in (401, 403) else ""
                    raise FileUnreadable(f"Slack would not give {name} (HTTP {response.status}){scope}")
                if response.content_type == SIGN_IN_PAGE and not (ref.mime or "").startswith(SIGN_IN_PAGE):
                    raise FileUnreadable(f"Slack answered with a sign-in page, not {name}: {NEEDS_SCOPE}")
                return await _read(response, name, max_bytes)
        raise FileUnreadable(f"Slack redirected {name} too many times")

    def _session(self) -> aiohttp.ClientSession:
        shared = self._client.session
        if shared is not None and not shared.closed:
            return shared
        if self._own is None or self._own.closed:
            self._own = aiohttp.ClientSession()
        return self._own

    async def aclose(self) -> None:
        if self._own is not None:
            await self._own.close()
            self._own = None


async def _read(response: aiohttp.ClientResponse, name: str, max_bytes: int) -> bytes:
    """The body, stopped as soon as it passes `max_bytes` (whatever its Content-Length claimed)."""
    too_big = FileTooBig(f"{name} is over the {megabytes(max_bytes)} limit")
    if response.content_length is not None and response.content_length > max_bytes:
        raise too_big
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_chunked(CHUNK):
        total += len(chunk)
        if total > max_bytes:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)

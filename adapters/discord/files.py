"""Files people share with nerve on Discord: a message's attachments and `/ask`'s `file` option.

A shared file reaches the core as a `SharedFile` whose fetch is discord.py's own `Attachment.read()`
(the CDN URL Discord gave, with the library's session and proxy). Discord states every attachment's
size, so a file over the core's limit is refused before any byte is downloaded.

A delivery is kept as a `Job` (the inbox payload) and may be answered after a restart or by another
process, so what it keeps of an attachment is Discord's own description of it (`Attachment.to_dict`);
the `Attachment` is made again from it where the turn runs. Discord signs its CDN URLs for about a
day: a delivery answered later than that finds its files gone, and the core says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import aiohttp
import discord
from discord.state import ConnectionState

from bot.errors import FileTooBig, FileUnreadable
from bot.types import Fetch, SharedFile

if TYPE_CHECKING:
    from discord.types.message import Attachment as AttachmentPayload

logger = logging.getLogger(__name__)

# An attachment as Discord describes it (id, filename, size, url, proxy_url, content_type…): JSON.
AttachmentRecord = dict[str, Any]
MB = 1024 * 1024


def megabytes(size: int) -> str:
    """A size as people read it next to a limit set in MB: `30 MB`, `2.4 MB`."""
    return f"{size / MB:.1f}".removesuffix(".0") + " MB"


def shared_file(attachment: discord.Attachment) -> SharedFile:
    """The core's view of one attachment; nothing is downloaded until the core fetches it."""
    return SharedFile(
        name=attachment.filename,
        fetch=fetcher(attachment),
        size=attachment.size,
        mime=attachment.content_type,
        ref=str(attachment.id),
    )


def shared_files(attachments: Iterable[discord.Attachment]) -> tuple[SharedFile, ...]:
    return tuple(shared_file(attachment) for attachment in attachments)


def fetcher(attachment: discord.Attachment) -> Fetch:
    """Read `attachment` through discord.py, at most `max_bytes` of it."""

    async def fetch(max_bytes: int) -> bytes:
        name = attachment.filename
        if attachment.size > max_bytes:
            # Discord's stated size is the file's: no download for a file the core would not read.
            raise FileTooBig(too_big(name, attachment.size, max_bytes))
        try:
            data = await attachment.read()
        except discord.HTTPException as exc:
            logger.info("could not download attachment %s (%s): %s", attachment.id, name, exc.status)
            gone = exc.status in (403, 404)
            reason = "it was deleted or its link expired" if gone else f"Discord answered {exc.status}"
            raise FileUnreadable(f"I could not download {name} from Discord: {reason}.") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            logger.info("could not download attachment %s (%s): %r", attachment.id, name, exc)
            raise FileUnreadable(f"I could not download {name} from Discord: the download failed.") from exc
        if len(data) > max_bytes:
            raise FileTooBig(too_big(name, len(data), max_bytes))
        return data

    return fetch


def too_big(name: str, size: int, max_bytes: int) -> str:
    return f"{name} is {megabytes(size)}, over the limit of {megabytes(max_bytes)} per file."


def records(attachments: Iterable[discord.Attachment]) -> tuple[AttachmentRecord, ...]:
    """What a delivery keeps of its attachments: Discord's own payload, enough to download them later."""
    return tuple(dict(attachment.to_dict()) for attachment in attachments)


def from_records(kept: Iterable[AttachmentRecord], state: ConnectionState[Any]) -> tuple[SharedFile, ...]:
    """The shared files of a kept delivery, as discord.py attachments of the client answering it."""
    return shared_files(
        discord.Attachment(data=cast("AttachmentPayload", record), state=state) for record in kept
    )

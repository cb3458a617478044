"""Talking to Discord safely: no pings, no posting where we are not allowed, buttons that outlive us.

Every send passes `AllowedMentions.none()` itself, so text from the model or a tool can never ping
anyone, whichever code path sends it; only nerve's own lines calling a scheduled run's person ping
that one person (`only`). Buttons are `DynamicItem`s whose custom_id carries what a
click needs, so a click on a message posted before a restart still reaches a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, ClassVar, Self

import discord

from adapters.common import refs
from adapters.discord.render import ResultsCache, results_view
from bot.agent import KeyedLocks
from bot.text import truncate
from bot.types import Attachment, ConversationKey

logger = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()


def only(user_id: str) -> discord.AllowedMentions:
    """Mentions that ping this one user (a scheduled run's person) and no one else."""
    return discord.AllowedMentions(
        everyone=False, roles=False, replied_user=False, users=[discord.Object(int(user_id))]
    )


TYPING_EVERY = 8.0  # Discord shows "typing…" for 10 s per trigger


class ChannelGuard:
    """Channels where Discord answered 403, left alone until the bot restarts: retrying only earns
    more 403s, and Discord temporarily bans bots that collect too many."""

    def __init__(self) -> None:
        self._blocked: set[int] = set()

    def blocked(self, channel_id: int) -> bool:
        return channel_id in self._blocked

    def block(self, channel_id: int, exc: discord.Forbidden) -> None:
        if channel_id not in self._blocked:
            self._blocked.add(channel_id)
            logger.warning(
                "Discord refused a post in channel %s (403, code %s: %s); not posting there again until "
                "restart. Give the bot Send Messages (and Create Public Threads) there.",
                channel_id,
                exc.code,
                exc.text,
            )


async def send_message(
    channel: discord.abc.Messageable,
    content: str,
    *,
    guard: ChannelGuard,
    channel_id: int,
    embeds: Sequence[discord.Embed] = (),
    file: discord.File | None = None,
    files: Sequence[discord.File] = (),
    view: discord.ui.View | None = None,
    reference: discord.MessageReference | None = None,
    mentions: discord.AllowedMentions = NO_MENTIONS,
    nonce: str | None = None,
) -> discord.Message | None:
    """Post in a channel; None (logged) when Discord refused. `mentions` pings no one unless it is
    `only(user)`: text from the model or a tool never goes out with more. With `nonce`, Discord
    returns the message posted with it before (within minutes) instead of posting another."""
    if guard.blocked(channel_id):
        return None
    given = {
        "embeds": list(embeds),
        "file": file,
        "files": list(files),
        "view": view,
        "reference": reference,
        "nonce": nonce,
    }
    extra: dict[str, Any] = {name: value for name, value in given.items() if value not in (None, [])}
    try:
        return await channel.send(content, allowed_mentions=mentions, **extra)
    except discord.Forbidden as exc:
        guard.block(channel_id, exc)
    except discord.RateLimited as exc:
        logger.warning(
            "Discord asked to wait %.0f s before posting in channel %s, longer than "
            "NERVE_DISCORD_MAX_RATELIMIT_TIMEOUT allows; this reply was not posted",
            exc.retry_after,
            channel_id,
        )
    except discord.HTTPException as exc:
        logger.warning("posting in channel %s failed: %s %s", channel_id, exc.status, exc.text)
    return None


async def landed(call: Awaitable[object], failed: str, *args: object, level: int = logging.WARNING) -> bool:
    """Await one call to Discord; False, logged as `failed` with its status and text, if refused."""
    try:
        await call
    except discord.HTTPException as exc:
        logger.log(level, f"{failed} (%s %s)", *args, exc.status, exc.text)
        return False
    return True


async def acknowledge(interaction: discord.Interaction[Any]) -> bool:
    """Acknowledge at once (Discord's 3 seconds) before asking the core; False if that failed."""
    return await landed(interaction.response.defer(), "could not acknowledge interaction %s", interaction.id)


async def tell(
    interaction: discord.Interaction[Any], text: str, view: discord.ui.View | None = None, **extra: Any
) -> None:
    """A message only the person who used a command or clicked sees (a follow-up once answered)."""
    if view is not None:
        extra["view"] = view
    send = interaction.followup.send if interaction.response.is_done() else interaction.response.send_message
    await send(text, ephemeral=True, allowed_mentions=NO_MENTIONS, **extra)


def reply_reference(channel_id: int, message_id: int, guild_id: int | None) -> discord.MessageReference:
    """A reply that still posts if the user's message was deleted meanwhile."""
    return discord.MessageReference(
        message_id=message_id, channel_id=channel_id, guild_id=guild_id, fail_if_not_exists=False
    )


@contextlib.asynccontextmanager
async def typing(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Keeps "typing…" showing while a turn runs; a failure to show it never fails the turn."""

    async def keep() -> None:
        while await landed(channel.typing(), "typing indicator failed", level=logging.DEBUG):  # noqa: ASYNC110
            await asyncio.sleep(TYPING_EVERY)

    task = asyncio.create_task(keep(), name="discord-typing")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def response_id(interaction: discord.Interaction[Any]) -> int | None:
    try:
        return (await interaction.original_response()).id
    except discord.HTTPException:
        return None


class ConversationOrder(KeyedLocks[ConversationKey]):
    """One FIFO lock per conversation, held from the turn until its reply is posted: posting happens
    after the turn, so a quick second answer could overtake a first one still being posted."""


GONE = (
    "These tool results are no longer available (the bot restarted or they expired). "
    "Ask again to see fresh ones."
)


# Discord's limit for a component's custom_id.
CUSTOM_ID_LIMIT = 100


def fitted(made: str, template: str) -> str:
    """`made` as a button's custom_id; ValueError when Discord would refuse it or `template` not read it."""
    if len(made) > CUSTOM_ID_LIMIT or not re.fullmatch(template, made):
        raise ValueError(f"{made!r} does not fit in a Discord custom_id")
    return made


class ClickButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=r"(?!)"):
    """A button that outlives this process: its custom_id carries its click (`click_id`, read back by
    `read`), so whichever process receives it hands it to `clicked` of the client's flow `route`."""

    route: ClassVar[str]
    fallback: ClassVar[str] = "Answer"  # the label when discord.py gives no button back
    prefix: ClassVar[str] = ""

    def __init__(
        self,
        click: Any,
        *,
        label: str,
        style: discord.ButtonStyle = discord.ButtonStyle.secondary,
        row: int | None = None,
        emoji: str | None = None,
    ) -> None:
        label, custom_id = truncate(label, 80)[0], self.click_id(click)
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=custom_id, row=row, emoji=emoji)
        )
        self.click = click

    # Unless a button says otherwise, its click is a string: its custom_id after `prefix`, and
    # its template's only group.
    @classmethod
    def click_id(cls, click: Any) -> str:
        return cls.prefix + str(click)

    @staticmethod
    def read(match: re.Match[str]) -> Any:
        return match[1]

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> Self:
        button = item if isinstance(item, discord.ui.Button) else None
        label = (button.label if button is not None else None) or cls.fallback
        return cls(
            cls.read(match), label=label, style=button.style if button else discord.ButtonStyle.secondary
        )

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        flow = getattr(interaction.client, self.route, None)
        if flow is None:
            await interaction.response.defer()
        else:
            await flow.clicked(interaction, self.click)


class ToolResultsButton(ClickButton, template=r"nerve:tools:(?P<ref>[0-9a-f]{1,32})"):
    """The "Tool results" button, carrying its reply's reference; its click is answered here, at once."""

    prefix = "nerve:tools:"

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        cache = getattr(interaction.client, "results", None)
        attachments = cache.get(self.click) if isinstance(cache, ResultsCache) else None
        if attachments is None:
            await tell(interaction, GONE)
            return
        shown = results_view(attachments)
        file: dict[str, Any] = {"file": shown.file()} if shown.file_text is not None else {}
        await tell(interaction, shown.content, embeds=shown.embeds, **file)


def view_of(*items: discord.ui.Item[Any]) -> discord.ui.View:
    """A view of `items` that never times out: its buttons work as long as its message is there."""
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    return view


def results_button_view(results: ResultsCache, attachments: tuple[Attachment, ...]) -> discord.ui.View:
    """The results kept under a new reference, and a view with their button (no timeout: it outlives us)."""
    ref = secrets.token_hex(8)
    results.put(ref, attachments)
    return view_of(ToolResultsButton(ref, label="Tool results", emoji="🔧"))


def parse_message_ref(ref: str | None) -> tuple[int, int] | None:
    found = refs.parse_message_ref(ref)
    if found is not None and found[0].isdigit() and found[1].isdigit():
        return int(found[0]), int(found[1])
    return None

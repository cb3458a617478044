"""The answer shown as it is written: messages edited in place, throttled, then the final answer.

Discord has no streaming API. The progress sink only records the turn so far and wakes a writer
task, so a slow or rate-limited edit never holds up the model's stream; the writer edits at most
once every `every` seconds with the newest text. `deliver()` turns the messages shown into the
final answer, so an answer is always the same messages, never a second copy.
"""

from __future__ import annotations

import asyncio
import logging

import discord

from adapters.common.throttle import Throttle
from adapters.common.turn_so_far import Call, TurnSoFar, percent
from adapters.discord.pages import Page, PageGone, Poster
from adapters.discord.render import MAX_TOOL_LINES, MESSAGE_LIMIT, format_latency, layout
from bot.text import truncate
from bot.types import TurnEvent

logger = logging.getLogger(__name__)

EDIT_EVERY = 1.2
# How long `stop()` lets an edit in flight finish (discord.py may be waiting out a 429).
STOP_WAIT = 90.0


class LiveAnswer:
    """One answer's messages: `progress` is the turn's sink, `stop` then `deliver` the final answer."""

    def __init__(self, poster: Poster, *, pages: list[Page] | None = None, every: float = EDIT_EVERY) -> None:
        self._poster = poster
        self.pages: list[Page] = list(pages or [])
        # What each page shows now (None: nothing of ours yet, e.g. the deferred "thinking…").
        self._shown: list[str | None] = [None] * len(self.pages)
        self.view = LiveView()
        # Each edit shows the newest text: rendered when it goes, not when it was asked for.
        self._edits = Throttle(lambda: True, self._edit, every)

    async def progress(self, event: TurnEvent) -> None:
        """A `Progress` sink: record and ask for an edit; never waits for Discord."""
        if self.view.record(event, asyncio.get_running_loop().time()):
            self._edits.request()

    async def _edit(self, _: bool) -> None:
        hold = 0.0
        try:
            if not await self._write(self.view.chunks(), None, final=False):
                self._edits.stop()
        except discord.RateLimited as exc:
            # Longer than discord.py will wait by itself: show the newest text after the wait.
            hold = exc.retry_after
            self._edits.request()
        except Exception:
            # Showing progress must never fail the turn; the final answer is delivered anyway.
            logger.exception("updating a live answer failed; showing the final answer only")
            self._edits.stop()
        # The interval counts from the end of an edit (discord.py may have waited out a 429 in it).
        self._edits.mark_sent(hold=hold)

    async def stop(self) -> None:
        """No more live edits; returns once an edit in flight has landed."""
        if not await self._edits.close(STOP_WAIT):
            logger.warning("a live answer edit took over %.0f s; going on with the final answer", STOP_WAIT)

    # --- writing ------------------------------------------------------------------------------------

    async def deliver(self, chunks: list[str], view: discord.ui.View | None) -> bool:
        """The final answer into the messages shown, the view on the last; False if some was not posted."""
        await self.stop()
        return await self._write(chunks, view, final=True)

    async def _write(self, chunks: list[str], view: discord.ui.View | None, *, final: bool) -> bool:
        if not chunks:
            return True
        i = 0
        while i < len(chunks):
            chunk, page_view = chunks[i], view if i == len(chunks) - 1 else None
            if i < len(self.pages) and (self._shown[i] != chunk or page_view is not None):
                try:
                    await self.pages[i].edit(chunk, view=page_view)
                except PageGone as exc:
                    # Post this part again (and everything after it) as new messages.
                    logger.info("a live answer message can no longer be edited (%s); posting anew", exc)
                    self._abandon(i)
                    continue
                except discord.RateLimited:
                    if not final:
                        raise
                    logger.warning("Discord asked to wait too long before an edit; posting the rest anew")
                    self._abandon(i)
                    continue
                except discord.HTTPException as exc:
                    logger.warning("editing a live answer message failed: %s %s", exc.status, exc.text)
                    if not final:
                        return False
                    self._abandon(i)
                    continue
                self._shown[i] = chunk
            elif i >= len(self.pages):
                page = await self._poster.post(chunk, view=page_view)
                if page is None:
                    return False
                self.pages.append(page)
                self._shown.append(chunk)
            i += 1
        await self._drop_from(len(chunks))
        return True

    async def discard(self, *, keep: int = 0) -> None:
        """Delete the answer's messages after the first `keep` (a deferred response stays anyway)."""
        await self.stop()
        await self._drop_from(keep)

    def _abandon(self, index: int) -> None:
        """Forget pages from `index` on: they stay as they are, the answer goes on in new messages."""
        del self.pages[index:]
        del self._shown[index:]

    async def _drop_from(self, index: int) -> None:
        """Delete pages the answer no longer needs (a long draft the model replaced)."""
        for page in self.pages[index:]:
            await page.delete()
        self._abandon(index)


WAITING_FOR_INPUT = "📝 waiting for an answer to a tool's question"


def call_line(call: Call) -> str:
    """`🔧 calling name…` while it runs, then the final answer's `🔧 name ✓ 312 ms`."""
    if call.finished is None:
        # The server's words, shown as they are: no Markdown of theirs takes effect.
        said = truncate(discord.utils.escape_markdown(" ".join(call.progress.split())), 120)[0]
        return f"-# 🔧 calling {call.name}… {said}{percent(call.fraction)}".rstrip()
    mark = "✓" if call.ok else "✗"
    return f"-# 🔧 {call.name} {mark} {format_latency((call.finished - call.started) * 1000)}"


class LiveView(TurnSoFar):
    """The turn so far (`record` each event); `chunks()` lays it out as message contents."""

    def status_lines(self) -> str:
        calls = list(self.calls.values())
        lines = [call_line(call) for call in calls[:MAX_TOOL_LINES]]
        hidden = len(calls) - MAX_TOOL_LINES
        if hidden > 0:
            running = sum(1 for call in calls[MAX_TOOL_LINES:] if call.finished is None)
            lines.append(f"-# … and {hidden} more tool call{'s' if hidden != 1 else ''} ({running} running)")
        if self.status_line is not None:
            lines.append(f"-# {WAITING_FOR_INPUT if self.waiting else f'⏳ {self.status_line}'}")
        return "\n".join(lines)

    def chunks(self, limit: int = MESSAGE_LIMIT) -> list[str]:
        return layout(self.text, self.status_lines(), limit)

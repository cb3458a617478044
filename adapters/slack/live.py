"""The answer as ONE Slack streaming message: chat.startStream, batched appends, chat.stopStream.

At most one append per interval, from a writer task of our own, so the turn never waits on Slack.
Anything Slack refuses turns into the edited message of `progress.StatusMessage`, never a second
answer. A stream cannot take anything back: a draft of an earlier round means the finished message is
rewritten, and each piece is escaped as the finished text will be, so it ends after whitespace and
before any `[` that may still open a link.
"""

from __future__ import annotations

import logging
import re
from dataclasses import KW_ONLY, dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_chat_stream import AsyncChatStream

from adapters.common.throttle import Throttle
from adapters.slack.events import Turn
from adapters.slack.post import REFUSED_BLOCKS, Poster, api_error
from adapters.slack.progress import AssistantStatus, Concluded, StatusMessage, tool_progress_text
from adapters.slack.render import (
    Level,
    answer_chunks,
    feedback_block,
    render_reply,
    safe_markdown,
    undo_blocks,
)
from adapters.slack.render import call_outcome as outcome
from bot.text import truncate
from bot.types import AgentReply, TurnEvent

logger = logging.getLogger(__name__)

# chat.startStream errors that mean the workspace (not this place) has no streaming messages.
UNSUPPORTED = frozenset(
    {"unknown_method", "method_not_supported", "method_deprecated", "not_allowed_token_type"}
    | {"feature_not_enabled", "not_supported"}
)
CHUNK_TEXT_LIMIT = 12_000  # markdown per chunk (chat.appendStream's documented limit)
# Text streamed into one message; past it the words wait for the end, where long answers are split.
STREAM_TEXT_CAP = 8_000
STATUS_TASK = "nerve-status"
_TITLE_LIMIT = 150


def _task(task_id: str, title: str, status: str, **more: str) -> dict[str, Any]:
    chunk = {"type": "task_update", "id": task_id[:200], "title": truncate(title, _TITLE_LIMIT)[0]}
    return {**chunk, "status": status, **{k: truncate(v, 500)[0] for k, v in more.items() if v}}


def _is_running(op: dict[str, Any], task_id: str) -> bool:
    return bool(op["type"] == "task_update" and op["id"] == task_id and op["status"] == "in_progress")


# A `[` that can still become `[label](url "title")` as more text arrives (mirrors render's _MD_LINK).
_OPEN_LINK = re.compile(r'\[[^\]\n]*(?:\](?:\(\s*<?[^)\s>]*>?(?:\s+"[^"]*"?)?\s*)?)?\Z')
_FULL_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def stable_cut(text: str, start: int = 0) -> int:
    """How much of `text` (from `start`) can be escaped now without more text changing it."""
    cut = max(text.rfind(" ", start), text.rfind("\n", start), text.rfind("\t", start)) + 1
    if cut <= start:
        return start
    line = text.rfind("\n", 0, cut - 1) + 1
    pos = text.find("[", max(line, start), cut)
    while pos != -1:
        link = _FULL_LINK.match(text, pos)
        if link is not None:
            if link.end() > cut:
                return pos  # a complete link that the cut would split
            pos = text.find("[", link.end(), cut)
            continue
        if _OPEN_LINK.match(text, pos):
            return pos  # may still become a link
        pos = text.find("[", pos + 1, cut)
    return cut


class SafePieces:
    """One round's text, handed out as escaped pieces that join up to the escaped whole."""

    def __init__(self) -> None:
        self.raw = ""
        self.cut = 0  # raw characters already handed out
        self.sent = ""  # the escaped text handed out

    def add(self, delta: str) -> None:
        self.raw += delta

    def take(self, *, final: bool) -> str:
        """The next escaped piece: what is settled, or (at the end of the round) everything left."""
        cut = len(self.raw) if final else stable_cut(self.raw, self.cut)
        if cut <= self.cut:
            return ""
        whole = safe_markdown(self.raw[:cut])
        # Escaping the longer text normally just extends what was sent; if an edge case (a code span
        # closing later) makes it differ, the new part is escaped on its own: still safe.
        piece = whole[len(self.sent) :]
        if not whole.startswith(self.sent):
            piece = safe_markdown(self.raw[self.cut : cut])
        self.cut = cut
        self.sent += piece
        return piece


@dataclass(eq=False)
class StreamedAnswer:
    """One answer streamed into the thread; `conclude` stops it with the final answer."""

    poster: Poster
    turn: Turn
    _: KW_ONLY
    interval: float
    edit_interval: float
    status: AssistantStatus | None = None  # the assistant container's status line, until the first words
    feedback: bool = False

    def __post_init__(self) -> None:
        assert self.turn.reply_thread_ts is not None, "a stream is always a reply in a thread"
        self._team = self.turn.key.workspace
        self._stream: AsyncChatStream | None = None
        self._ops: list[dict[str, Any]] = []  # chunks not sent yet, in the order they happened
        self._round = SafePieces()
        self._stale = False  # text of an earlier round went out
        self._streamed_chars = 0
        self._overflow = False
        self._tasks: dict[str, str] = {}  # call id → tool name, for the calls shown as tasks
        self._status_open = False
        self._content = False
        # What the edited message would show, kept from the start: Slack may refuse the stream any time.
        self._edits = StatusMessage(self.poster, self.turn, self.edit_interval)
        self._fallback: StatusMessage | None = None  # `_edits`, once the answer is edited in place
        self._concluded = False
        # At most one append per interval, from a task of its own; it takes what waits when it runs.
        self._writer = Throttle(lambda: True, self._write, self.interval)

    @property
    def message_ts(self) -> str | None:
        if self._fallback is not None:
            return self._fallback.message_ts
        return self._stream.ts if self._stream is not None else None

    async def _open(self) -> AsyncChatStream:
        if self._stream is None:
            turn = self.turn
            self._stream = await self.poster.client.chat_stream(
                channel=turn.channel,
                thread_ts=turn.reply_thread_ts or "",
                recipient_team_id=self._team or None,
                recipient_user_id=turn.incoming.user_id or None,
                task_display_mode="timeline",
            )
        return self._stream

    async def start(self) -> None:
        """Start the message at once, with a "Thinking…" task; raises SlackApiError if Slack refuses."""
        self._status_open = True
        stream = await self._open()
        # The first append starts the message (chat.startStream): a post in the channel's pace.
        chunks = [_task(STATUS_TASK, "Thinking…", "in_progress")]
        await self.poster.paced(self.turn.channel, lambda: stream.append(chunks=chunks))
        self._writer.mark_sent()

    # --- recording (never waits on Slack) ---------------------------------------------------------

    async def on_event(self, event: TurnEvent) -> None:
        if self._fallback is not None:
            await self._fallback.on_event(event)
            return
        self._edits.record(event)
        if self.status is not None and not self._content:
            await self.status.on_event(event)
        kind, call, tool = event.kind, event.tool_call_id or "", event.tool or "tool"
        if kind == "text" and event.message:
            self._shown()
            self._round.add(event.message)
        elif kind == "thinking":
            self._push_text(final=True)
            self._stale = self._stale or bool(self._round.sent)
            self._round = SafePieces()
            return
        elif kind == "tool_started" and call:
            self._shown()
            self._push_text(final=True)
            self._tasks[call] = tool
            self._ops.append(_task(call, tool, "in_progress"))
        elif kind == "tool_finished" and call in self._tasks:
            self._ops.append(_task(call, tool, "complete" if event.ok else "error", output=event.message))
        elif kind == "tool_progress" and call in self._tasks:
            chunk = _task(call, tool, "in_progress", details=tool_progress_text(event))
            # Only the newest state of a running call waits for the next append (latest wins).
            same = [i for i, op in enumerate(self._ops) if _is_running(op, chunk["id"])]
            if same:
                self._ops[same[-1]] = chunk
            else:
                self._ops.append(chunk)
        elif kind == "retrying" and call in self._tasks:
            self._ops.append(_task(call, tool, "in_progress", details=event.message))
        elif kind in ("notice", "retrying") and self._status_open:
            self._ops.append(_task(STATUS_TASK, "Thinking…", "in_progress", details=event.message))
        else:
            return
        self._writer.request()

    def _shown(self) -> None:
        """The answer starts showing: the status line and the "Thinking…" task are done."""
        if self._content:
            return
        self._content = True
        if self.status is not None:
            self.status.stop()
        if self._status_open:
            self._status_open = False
            self._ops.append(_task(STATUS_TASK, "Thinking…", "complete"))

    def _push_text(self, *, final: bool) -> None:
        if self._overflow:
            return
        piece = self._round.take(final=final)
        if not piece:
            return
        if self._streamed_chars + len(piece) > STREAM_TEXT_CAP:
            self._overflow = True  # the rest goes out at the end, split where Slack needs it
            return
        self._streamed_chars += len(piece)
        last: dict[str, Any] = self._ops[-1] if self._ops else {"type": None}
        if last["type"] == "markdown_text" and len(last["text"]) + len(piece) <= CHUNK_TEXT_LIMIT:
            last["text"] += piece
        else:
            self._ops.append({"type": "markdown_text", "text": piece})

    async def _write(self, _: bool) -> None:
        """Append what waits; what Slack refuses goes with the next call, or to the edited message."""
        if self._fallback is not None:
            return
        try:
            self._push_text(final=False)
            if not self._ops:
                return
            sending, self._ops = self._ops, []
            try:
                stream = await self._open()
                await stream.append(chunks=sending)
            except SlackApiError as exc:
                self._ops[0:0] = sending  # nothing of it landed: it goes with the next call
                await self._refused(exc)
        except Exception:
            logger.exception("streaming the answer in %s failed", self.turn.key)

    async def _refused(self, exc: SlackApiError) -> None:
        error = api_error(exc)
        if error == "ratelimited":
            logger.info("Slack rate-limited an append in %s; it goes with the next one", self.turn.key)
            return
        ts = self._stream.ts if self._stream is not None else None
        if ts is None and error in UNSUPPORTED:
            self.poster.refuse_streams(self._team)
        logger.warning(
            "Slack refused the streamed answer in %s (%s); editing a message instead", self.turn.key, error
        )
        self._fallback = self._edits
        if ts is not None:
            self._edits.adopt(ts)
        else:
            await self._edits.start()

    async def close(self) -> None:
        """Stop the writer (a call in flight still lands); what is left goes with the stop."""
        await self._writer.close()
        if self.status is not None:
            await self.status.close()
        await self._edits.close()

    # --- the end -------------------------------------------------------------------------------------

    async def conclude(self, reply: AgentReply, level: Level) -> Concluded:
        """Stop the stream with the final answer, or say which message the answer replaces."""
        if self._fallback is not None:
            return await self._fallback.conclude(reply, level)
        if self._concluded:
            return Concluded()
        self._concluded = True
        feedback = self.feedback and not (reply.failed or reply.approval or reply.deferred)
        head = render_reply(reply, Level.RICH).messages[0]
        first = answer_chunks(reply.text)[0]
        fits = (
            level is Level.RICH
            and not (self._stale or self._overflow)
            and (head.blocks or [{}])[-1] == {"type": "markdown", "text": first}
            and first.startswith(self._round.sent)
        )
        finals = self._final_tasks(reply)
        try:
            stream = await self._open()
            if not fits:
                if stream.ts is None:
                    return Concluded()  # nothing showed: the answer is posted as usual
                await stream.stop(chunks=[c for c in self._ops if c["type"] != "markdown_text"] + finals)
                return Concluded(feedback=feedback)
            rest = first[len(self._round.sent) :]
            chunks = [*self._ops, *([{"type": "markdown_text", "text": rest}] if rest else []), *finals]
            blocks = [
                *(head.blocks or [])[:-1],
                *([feedback_block(self.turn.event_id)] if feedback else []),
                *undo_blocks(reply),
            ]
            try:
                await stream.stop(chunks=chunks, blocks=blocks or None)
            except SlackApiError as exc:
                if api_error(exc) not in REFUSED_BLOCKS or stream.ts is None:
                    raise
                # The tool results' containers or the feedback buttons are too new for this workspace:
                # stop with the text alone, then the answer replaces it at a level Slack takes.
                self.poster.downgrade(self._team, Level.RICH)
                await stream.stop(chunks=chunks)
                raise
        except SlackApiError as exc:
            error = api_error(exc)
            started = self._stream is not None and self._stream.ts is not None
            if not started and error in UNSUPPORTED:
                self.poster.refuse_streams(self._team)
            logger.warning(
                "could not finish the streamed answer in %s (%s); replacing it", self.turn.key, error
            )
            return Concluded(feedback=feedback and started)
        return Concluded(delivered=1)

    def _final_tasks(self, reply: AgentReply) -> list[dict[str, Any]]:
        """Each shown call's outcome, the calls that wait for a person, the status task done."""
        chunks = [
            _task(att.tool_call_id, att.name, "error" if att.is_error else "complete", output=outcome(att))
            for att in reply.attachments
            if att.tool_call_id in self._tasks
        ]
        waiting = reply.approval.calls if reply.approval is not None else []
        chunks += [
            _task(call.call_id, call.tool, "pending", details="waiting for approval")
            for call in waiting
            if call.status == "pending"
        ]
        if self._status_open:
            chunks.append(_task(STATUS_TASK, "Thinking…", "complete"))
        return chunks

"""`nerve ask`, `threads`, `history` and `delete`: the terminal's conversations of the person at it,
never Slack's or Discord's, which hold other people's messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from adapters.terminal.safe import printable, say, terminal_json
from adapters.terminal.views import _utc, conversation_key, format_history, write_table
from bot.config import Settings
from bot.store.base import ConversationStore
from bot.store.choose import open_configured_store
from bot.store.rows import message_to_json
from bot.store.threads import StoredConversation, StoredMessage
from bot.text.scrubbing import scrub
from bot.types import AuditEntry, ConversationKey

Job = Callable[[Settings], Coroutine[Any, Any, int]]

# A deletion waits for the turn running in its conversation; after this many seconds it says so.
WAITING_NOTICE_SECONDS = 1.0
NOTHING_TO_ASK = "nerve: nothing to ask: give the question as an argument, or - to read it from stdin\n"


def fresh_thread_name() -> str:
    """`ask-<when>-<random>`: two scripts asking in the same second never share a conversation."""
    return f"ask-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def ask_job(
    text: str, thread: str | None, *, as_json: bool, approve_all: bool, files: Sequence[str] = ()
) -> Job:
    """One question, then exit; without `thread` in a fresh conversation: script runs never share
    history. `files` are looked at first: one that is missing or unreadable stops it before any model
    call, with exit code 2."""

    async def job(settings: Settings) -> int:
        from adapters.terminal.files import local_file
        from bot.errors import FileRefused

        try:
            shared = [await asyncio.to_thread(local_file, path) for path in files]
        except FileRefused as exc:
            say(f"nerve: {exc.message}", sys.stderr)
            return 2
        question = text
        if text == "-":
            question = await asyncio.to_thread(lambda: sys.stdin.buffer.read().decode("utf-8", "replace"))
        if not question.strip():
            sys.stderr.write(NOTHING_TO_ASK)
            return 2
        from adapters.terminal.runtime import terminal_runtime
        from adapters.terminal.views import ask

        name = thread if thread is not None else fresh_thread_name()
        async with terminal_runtime(settings, servers_in_background=False) as (runtime, _):
            try:
                return await ask(
                    runtime, name, question, as_json=as_json, approve_all=approve_all, files=shared
                )
            finally:
                if thread is None and not as_json:  # --json names it in its "thread" field
                    say(f"nerve: conversation {name} (continue it with --thread {name})", sys.stderr)

    return job


async def _own(store: ConversationStore, *, archived: bool) -> list[StoredConversation]:
    return await store.stored_conversations("terminal", conversation_key("").workspace, archived=archived)


def _row(c: StoredConversation) -> tuple[str, ...]:
    return c.key.thread, _utc(c.last_activity), f"{c.messages} messages", f"id {c.id}", _state(c)


def _state(conversation: StoredConversation) -> str:
    return "current" if conversation.archived_at is None else f"archived {_utc(conversation.archived_at)}"


def threads_job(*, archived: bool, as_json: bool) -> Job:

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            found = await _own(store, archived=archived)
        if as_json:
            sys.stdout.write(terminal_json([_conversation_json(c) for c in found]) + "\n")
        elif not found:
            hint = "" if archived else " (archived ones: nerve threads --all)"
            sys.stdout.write(f"No conversations yet{hint}.\n")
        else:
            write_table([_row(c) for c in found])
        return 0

    return job


def history_job(thread: str, conversation_id: int | None, *, archived: bool, as_json: bool) -> Job:
    """`nerve history`: a thread's conversation (or its earlier ones too), or one by id, with times."""

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            chosen = await _chosen(store, thread, conversation_id, archived=archived)
            if chosen is None:
                return 1
            shown = [
                (c, await store.stored_messages(c.id), await store.conversation_audit(c.id)) for c in chosen
            ]
        if as_json:
            name = chosen[0].key.thread if chosen else scrub(thread)
            body = [
                {
                    **_conversation_json(c),
                    "messages": [{"at": m.at, **message_to_json(m.message)} for m in ms],
                    "decisions": [asdict(a) for a in a_],
                }
                for c, ms, a_ in shown
            ]
            sys.stdout.write(terminal_json({"thread": name, "conversations": body}) + "\n")
            return 0
        if not shown:
            say(
                f"Thread {scrub(thread)!r} has no messages since it was reset; its earlier conversations:"
                f" nerve history --thread {scrub(thread)} --archived"
            )
            return 0
        lines: list[str] = []
        for conversation, messages, audit in shown:
            if len(shown) > 1 or conversation.archived_at is not None:
                lines.append(f"── conversation {conversation.id}, {_state(conversation)} ──")
            lines += format_timed(messages, audit)
        say("\n".join(lines))
        return 0

    return job


async def _chosen(
    store: ConversationStore, thread: str, conversation_id: int | None, *, archived: bool
) -> list[StoredConversation] | None:
    """What `nerve history` prints; None (having said why on stderr) when there is nothing by that name."""
    if conversation_id is not None:
        found = await store.stored_conversation(conversation_id)
        if found is None or found.key != conversation_key(found.key.thread):
            sys.stderr.write(f"nerve: no conversation with id {conversation_id} (see: nerve threads --all)\n")
            return None
        return [found]
    key = conversation_key(thread)
    # Oldest first, the active one last.
    ours = [c for c in await _own(store, archived=True) if c.key == key]
    mine = sorted(ours, key=lambda c: (c.archived_at is None, c.id))
    if not mine:
        say(f"nerve: no conversation named {scrub(thread)!r} (see: nerve threads)", sys.stderr)
        return None
    return mine if archived else [c for c in mine if c.archived_at is None]


def format_timed(messages: Sequence[StoredMessage], audit: Sequence[AuditEntry]) -> list[str]:
    """A conversation as `nerve history` prints it: `format_history`'s lines, each after its time."""
    lines: list[str] = []
    shown_calls: set[str] = set()
    for stored in messages:
        calls = {call.id for call in stored.message.tool_calls}
        shown_calls |= calls
        own = format_history([stored.message], [entry for entry in audit if entry.call_id in calls])
        stamp = f"[{_utc(stored.at)}] "
        # Each of a round's calls gets the time; a decision under a call is indented under it.
        lines += [
            f"{stamp}{line}" if index == 0 or not line[:1].isspace() else f"{' ' * len(stamp)}{line}"
            for index, line in enumerate(own)
        ]
    # Decisions on calls whose round is not stored yet: the turn still waits for a person.
    return lines + format_history([], [entry for entry in audit if entry.call_id not in shown_calls])


def delete_job(thread: str | None, conversation_id: int | None, *, yes: bool) -> Job:
    """`nerve delete`: a thread's conversations, or one by id, with all holding their text; asks first."""

    async def job(settings: Settings) -> int:
        async with await open_configured_store(settings) as store:
            chosen = await _chosen(store, thread or "", conversation_id, archived=True)
            if chosen is None:
                return 1
            what = _described(chosen)
            refused = None if yes else await _refused(what)
            if refused is not None:
                return refused
            key = chosen[0].key
            async with _holding(store, key):
                outcomes = [await store.delete_conversation(c.id) for c in chosen]
        if "waiting" in outcomes:
            say(
                f"nerve: a turn in thread {key.thread!r} waits for an approval or an answer: answer it"
                " (or /reset the thread), then delete",
                sys.stderr,
            )
            return 1
        say(f"Deleted {what}. The approvals audit keeps who decided which tool call, without the text.")
        return 0

    return job


def _described(chosen: Sequence[StoredConversation]) -> str:
    messages = sum(c.messages for c in chosen)
    name = chosen[0].key.thread
    if len(chosen) == 1:
        return f"conversation {name!r} (id {chosen[0].id}, {messages} messages)"
    return f"the {len(chosen)} conversations of thread {name!r} ({messages} messages)"


async def _refused(what: str) -> int | None:
    """The exit code when deleting is not confirmed; off a terminal it needs `--yes` (never by surprise)."""
    if not sys.stdin.isatty():
        say(f"nerve: not deleting {what}: add --yes to delete without asking", sys.stderr)
        return 2
    answer = await asyncio.to_thread(input, printable(f"Delete {what}? This cannot be undone. [y/N] "))
    if answer.strip().lower() in ("y", "yes"):
        return None
    sys.stderr.write("nerve: nothing deleted\n")
    return 1


@contextlib.asynccontextmanager
async def _holding(store: ConversationStore, key: ConversationKey) -> AsyncIterator[None]:
    """The thread's turn lock: a running turn finishes first (said if slow), none starts meanwhile."""
    notice = asyncio.get_running_loop().call_later(
        WAITING_NOTICE_SECONDS,
        lambda: sys.stderr.write("nerve: waiting for the turn running in this conversation to finish…\n"),
    )
    try:
        async with store.turn_lock.hold(key):
            notice.cancel()
            yield
    finally:
        notice.cancel()


def _conversation_json(conversation: StoredConversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "thread": conversation.key.thread,
        "started_at": conversation.started_at,
        "last_activity": conversation.last_activity,
        "message_count": conversation.messages,
        "archived_at": conversation.archived_at,
    }

"""Stored conversations listed, read back, deleted and pruned: on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.store.base import ConversationStore
from bot.store.dialect import days_ago, iso_utc
from bot.store.prune import prune_conversations, pruning_inbox
from bot.types import AuditEntry, ChatMessage, ConversationKey, Incoming, PendingCall, ToolCall
from tests.stores import Backend, ManualSchedule

pytestmark = pytest.mark.both_stores

WALKS = ConversationKey(platform="terminal", workspace="ada", channel="cli", thread="walks")
NOTES = ConversationKey(platform="terminal", workspace="ada", channel="cli", thread="notes")
OTHER_USER = ConversationKey(platform="terminal", workspace="bob", channel="cli", thread="walks")
SLACK = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1.0")
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def said(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def backdate(backend: Backend, key: ConversationKey, days: float, now: datetime | None = NOW) -> None:
    """Make every message and conversation of this thread `days` older than `now` (None: the real
    clock, which the prune job reads)."""
    stamp = days_ago(days) if now is None else iso_utc(now - timedelta(days=days))
    where = "platform = ? AND workspace = ? AND channel = ? AND thread = ?"
    params = (key.platform, key.workspace, key.channel, key.thread)
    await backend.rows(f"UPDATE conversations SET created_at = ? WHERE {where}", (stamp, *params))
    await backend.rows(
        "UPDATE messages SET created_at = ?"
        f" WHERE conversation_id IN (SELECT id FROM conversations WHERE {where})",
        (stamp, *params),
    )


def decision(outcome: str) -> AuditEntry:
    return AuditEntry(
        who="ada",
        place="terminal:cli",
        server="notes",
        tool="write",
        call_id="c0",
        arguments_hash="h",
        outcome=outcome,
    )


async def park_a_turn(store: ConversationStore, key: ConversationKey, request_id: str) -> None:
    call = ToolCall(id="c1", name="notes_write", arguments='{"text": "secret plan"}')
    await store.park(
        request_id=request_id,
        incoming=Incoming(key=key, text="write down the secret plan", user_id="ada"),
        answer=ChatMessage(role="assistant", tool_calls=(call,)),
        done=(),
        calls=[
            (
                PendingCall(
                    call_id="c1",
                    server="notes",
                    tool="write",
                    arguments={"text": "secret plan"},
                    call_hash="h",
                ),
                "d",
            )
        ],
        rounds_used=1,
        expires_at=NOW.timestamp() + 600,
    )


async def test_threads_lists_the_current_conversations_most_recently_active_first(
    store: ConversationStore,
) -> None:
    await store.append(WALKS, [said("first walk")])
    await store.reset(WALKS)
    await store.append(NOTES, [said("a note")])
    await store.append(WALKS, [said("second walk"), ChatMessage(role="assistant", content="ok")])
    await store.append(OTHER_USER, [said("bob's walk")])
    await store.append(SLACK, [said("in slack")])

    current = await store.stored_conversations("terminal", "ada")
    assert [(c.key.thread, c.messages, c.archived_at) for c in current] == [
        ("walks", 2, None),
        ("notes", 1, None),
    ]
    assert current[0].last_activity >= current[1].last_activity >= current[1].started_at

    every = await store.stored_conversations("terminal", "ada", archived=True)
    assert [(c.key.thread, c.messages, c.archived_at is None) for c in every] == [
        ("walks", 2, True),
        ("notes", 1, True),
        ("walks", 1, False),
    ]
    archived = every[-1]
    assert [m.message.content for m in await store.stored_messages(archived.id)] == ["first walk"]
    assert (await store.stored_conversation(archived.id)) == archived


async def test_stored_messages_carry_the_time_they_were_stored(store: ConversationStore) -> None:
    before = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    await store.append(WALKS, [said("hello")])
    (conversation,) = await store.stored_conversations("terminal", "ada")
    (stored,) = await store.stored_messages(conversation.id)
    assert stored.message == said("hello")
    assert stored.at[:19] >= before and stored.at.endswith("Z")


async def test_deleting_removes_the_text_everywhere_and_keeps_the_audit(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(WALKS, [said("write down the secret plan")])
    await store.record_audit(WALKS, [decision("approved")])
    await park_a_turn(store, WALKS, "r1")
    await store.defer(Incoming(key=WALKS, text="and the secret plan B", user_id="ada"))
    await store.close_parked(WALKS)  # as /reset does: the turn no longer waits
    (conversation,) = await store.stored_conversations("terminal", "ada")

    assert await store.delete_conversation(conversation.id) == "deleted"

    assert await store.history(WALKS) == []
    assert await store.stored_conversations("terminal", "ada", archived=True) == []
    assert await store.stored_conversation(conversation.id) is None
    for table in ("messages", "parked_turns", "pending_calls", "deferred_messages"):
        assert await store_backend.rows(f"SELECT * FROM {table}") == [], table
    audit = await store.conversation_audit(conversation.id)
    assert [(a.who, a.tool, a.outcome) for a in audit] == [("ada", "write", "approved")]
    assert not any(b"secret plan" in chunk for chunk in await store_backend.everything_stored())
    # The thread goes on in a fresh conversation.
    await store.append(WALKS, [said("again")])
    assert await store.history(WALKS) == [said("again")]
    assert await store.delete_conversation(conversation.id) == "missing"


async def test_deleting_an_archived_conversation_leaves_the_current_one_and_its_waiting_turn(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(WALKS, [said("old")])
    await store.reset(WALKS)
    await store.append(WALKS, [said("new")])
    await park_a_turn(store, WALKS, "r2")
    archived, current = sorted(
        await store.stored_conversations("terminal", "ada", archived=True), key=lambda c: c.id
    )
    # The turn was parked in the very millisecond of the reset: it is still the current conversation's.
    await store_backend.rows("UPDATE parked_turns SET created_at = ?", (archived.archived_at,))

    assert await store.delete_conversation(current.id) == "waiting", (
        "a turn waiting for a person is not cut off"
    )
    assert await store.delete_conversation(archived.id) == "deleted"

    assert await store.history(WALKS) == [said("new")]
    assert await store.waiting_in(WALKS) == "r2"
    assert len(await store_backend.rows("SELECT * FROM pending_calls")) == 1


async def test_retention_deletes_only_conversations_idle_longer_than_it(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(WALKS, [said("long ago")])
    await store.record_audit(WALKS, [decision("denied")])
    await store.append(NOTES, [said("last week")])
    await store.append(SLACK, [said("yesterday in slack")])
    await backdate(store_backend, WALKS, days=40)
    await backdate(store_backend, NOTES, days=7)
    await backdate(store_backend, SLACK, days=1)
    (walks,) = [c for c in await store.stored_conversations("terminal", "ada") if c.key == WALKS]

    assert await prune_conversations(store, older_than_days=30, now=NOW) == 1

    assert await store.history(WALKS) == []
    assert await store.history(NOTES) == [said("last week")]
    assert await store.history(SLACK) == [said("yesterday in slack")]
    assert [a.outcome for a in await store.conversation_audit(walks.id)] == ["denied"]
    assert await prune_conversations(store, older_than_days=5, now=NOW) == 1
    assert await store.history(NOTES) == []


async def test_retention_keeps_a_conversation_a_message_reached_since_it_was_found_idle(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(WALKS, [said("long ago")])
    await backdate(store_backend, WALKS, days=40)
    (idle,) = await store.idle_conversations(30, now=NOW)
    await store.append(WALKS, [said("just now")])

    cutoff = iso_utc(NOW - timedelta(days=30))
    assert await store.delete_conversation(idle.id, idle_before=cutoff) == "recent"
    assert await store.history(WALKS) == [said("long ago"), said("just now")]


async def test_the_prune_job_deletes_idle_conversations_at_start_and_on_its_schedule(
    store: ConversationStore, store_backend: Backend
) -> None:
    schedule = ManualSchedule()
    for key in (WALKS, NOTES, SLACK):
        await store.append(key, [said(f"in {key.thread}")])
    await backdate(store_backend, WALKS, days=31, now=None)
    await backdate(store_backend, SLACK, days=45, now=None)

    async with asyncio.timeout(10):
        async with pruning_inbox(
            store, retention_hours=24, conversation_retention_days=30, every=3600, wait=schedule.wait
        ):
            assert await store.history(WALKS) == [] and await store.history(SLACK) == []
            assert await store.history(NOTES) == [said("in notes")]
            assert await schedule.waits.get() == 3600
            await backdate(store_backend, NOTES, days=30.5, now=None)
            schedule.tick()
            assert (
                await schedule.waits.get() == 3600
            )  # the next wait begins once the scheduled pruning is done
            assert await store.history(NOTES) == []


async def test_without_a_retention_conversations_are_kept_however_old(
    store: ConversationStore, store_backend: Backend
) -> None:
    await store.append(WALKS, [said("years ago")])
    await backdate(store_backend, WALKS, days=3000, now=None)

    async def wait(seconds: float) -> None:
        await asyncio.Event().wait()

    async with asyncio.timeout(10), pruning_inbox(store, retention_hours=24, wait=wait):
        assert await store.history(WALKS) == [said("years ago")]

"""A person's data rights: everything stored about them as one document, or all of it forgotten.

Forgetting is one write transaction over every table that may hold what a person wrote or what was
kept for them: their private conversations go whole (a DM, or the terminal, is theirs alone); in
threads others read, their messages and nerve's answers to them are replaced by a note, so the
thread stays readable and the model still gets a well-formed history; what waited on them (parked
turns, deferred messages, tools' questions), their undelivered events in the inbox, their sign-ins,
their feedback, their schedules (with their runs), the files they shared and their personal memories
go; place memories they saved stay with the place, without their name. The approvals audit keeps who
decided which tool call and when: it holds no text.

On SQLite the deleted text is also out of the file afterwards: `secure_delete` overwrites freed
space, the memories' full-text index is merged so its deleted entries are gone, and the write-ahead
log is written back and emptied.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bot.seams import TurnLock
from bot.store.dialect import Connection
from bot.store.rows import MESSAGE_COLUMNS, key_from_row, message_from_row, message_to_json
from bot.store.threads import PARKED_TABLES, ThreadLedger
from bot.types import ConversationKey, Person

# What a person's forgotten message, and nerve's answer to it, read as in a thread others share.
MESSAGE_DELETED = "(message deleted at its author's request)"
ANSWER_DELETED = "(answer deleted with the message it answered)"
# The writer of a place memory whose writer was forgotten: the memory stays with the place.
FORGOTTEN_WRITER = "(forgotten)"
# The place and conversation a forgotten person's private usage is counted under: a DM's (or the
# terminal's) own names would still point at them.
FORGOTTEN_PRIVATE = "(forgotten private conversation)"

# A row naming people by their platform's user id: this person's, in their workspace (any workspace
# where user ids are global). Parameters: `_people_params`, then the user id.
_PERSON_ROWS = "platform = ? AND (CAST(? AS TEXT) IS NULL OR workspace = ?)"
# Conversations of this person alone: private, written in by them, and by nobody else known.
_PRIVATE = (
    "c.deleted_at IS NULL AND c.private = 1"
    " AND EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.author = ?)"
    " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user'"
    " AND m.author IS NOT NULL AND m.author <> ?)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    """What forgetting a person did, in counts (a person with nothing stored gets zeros)."""

    # Memories about them, deleted.
    memories: int = 0
    # Memories they saved about a place: kept there, no longer naming them.
    place_memories: int = 0
    # Their private conversations (DMs, the terminal), deleted with every message in them.
    conversations: int = 0
    # Their messages in threads others share, replaced by a note, and nerve's answers to them.
    messages: int = 0
    answers: int = 0
    # Their sign-ins to servers (tokens, and sign-ins under way), revoked and deleted.
    sign_ins: int = 0
    # Parked turns, messages deferred behind one, and tools' questions to them, deleted.
    waiting: int = 0
    # Their deliveries not answered yet, emptied (they are not answered any more).
    inbox: int = 0
    # Their votes on answers, deleted.
    feedback: int = 0
    # Their schedules, deleted with every run of them: nothing more runs as them.
    schedules: int = 0
    # Their own settings (a time zone they chose).
    settings: int = 0
    # The files they shared (what was read of them), wherever they shared them.
    files: int = 0

    def counts(self) -> dict[str, int]:
        return asdict(self)

    @property
    def total(self) -> int:
        return sum(self.counts().values())


def _people_params(person: Person) -> tuple[str, str | None, str | None]:
    return (person.platform, person.workspace, person.workspace)


def _strings(value: Any) -> Iterator[str]:
    """Every string value of decoded JSON, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _names(payload: str, person: Person) -> bool:
    """Whether a delivery's JSON is from `person`: their user id is one of its values (and their
    workspace's id, where ids are per workspace). A mention of them in someone's text is not."""
    try:
        found = set(_strings(json.loads(payload)))
    except ValueError:
        return False
    return person.user_id in found and (person.workspace is None or person.workspace in found)


def _redacted_calls(tool_calls: str | None) -> str | None:
    """A round's calls as the model must still see them (ids and names), their arguments emptied."""
    if not tool_calls:
        return tool_calls
    calls = json.loads(tool_calls)
    return json.dumps([call | {"arguments": "{}"} for call in calls], ensure_ascii=False)


class PersonLedger(ThreadLedger):
    """`forget_person` and `export_person`, over every ledger's tables."""

    async def forget_person(self, person: Person, *, locks: TurnLock | None = None) -> Forgotten:
        """Everything stored about `person` deleted or replaced, in one transaction (see the module).
        With `locks`, the turns running in the threads they wrote in finish first and none starts
        meanwhile, so no answer lands after its question was forgotten: so never call it from inside
        a turn of one of those threads."""
        async with contextlib.AsyncExitStack() as held:
            if locks is not None:
                for key in await self._threads_of(person):
                    await held.enter_async_context(locks.hold(key))
            return await self._forget(person)

    async def _threads_of(self, person: Person) -> list[ConversationKey]:
        """The threads whose active conversation has a message of theirs, in one order for everyone
        (so two callers taking several of their locks never wait on each other in a circle)."""
        rows = await self._rows(
            "SELECT DISTINCT c.platform, c.workspace, c.channel, c.thread FROM messages m"
            " JOIN conversations c ON c.id = m.conversation_id WHERE m.author = ? AND c.archived_at IS NULL",
            (person.id,),
        )
        return sorted((key_from_row(row) for row in rows), key=str)

    async def _forget(self, person: Person) -> Forgotten:
        async with self._write() as db:
            # Counted first: those in their private conversations go with them.
            files = await db.execute_fetchall("SELECT COUNT(*) FROM files WHERE author = ?", (person.id,))
            conversations, waiting, private = await self._forget_private(db, person)
            messages, answers = await self._redact_shared(db, person)
            # The files they shared in threads others read go with their messages there.
            await db.execute("DELETE FROM files WHERE author = ?", (person.id,))
            waiting += await self._forget_waiting(db, person)
            found = Forgotten(
                conversations=conversations,
                messages=messages,
                answers=answers,
                waiting=waiting,
                sign_ins=await self._forget_sign_ins(db, person),
                inbox=await self._empty_inbox(db, person),
                feedback=await _count(
                    db,
                    f"DELETE FROM feedback WHERE {_PERSON_ROWS} AND user_id = ?",
                    (*_people_params(person), person.user_id),
                ),
                memories=await _count(
                    db, "DELETE FROM memories WHERE kind = 'person' AND subject = ?", (person.id,)
                ),
                schedules=await self._forget_schedules(db, person),
                settings=await _count(db, "DELETE FROM person_settings WHERE person = ?", (person.id,)),
                files=int(files[0][0]),
                place_memories=await _count(
                    db,
                    "UPDATE memories SET written_by = ? WHERE written_by = ?",
                    (FORGOTTEN_WRITER, person.id),
                ),
            )
            # Their usage figures stay in the place's and workspace's totals, no longer theirs; those of
            # their private conversations no longer name the DM or thread (nor the message) either.
            await db.executemany(
                "UPDATE model_usage SET place = ?, conversation = ?, turn = NULL WHERE conversation = ?",
                [(FORGOTTEN_PRIVATE, FORGOTTEN_PRIVATE, str(key)) for key in private],
            )
            await db.execute("UPDATE model_usage SET person = NULL WHERE person = ?", (person.id,))
            if self._sql.name == "sqlite":
                # The full-text index keeps a deleted memory's words until its segments are merged.
                await db.execute("INSERT INTO memories_search (memories_search) VALUES ('optimize')")
        await self._write_back()
        return found

    async def _forget_private(self, db: Connection, person: Person) -> tuple[int, int, set[ConversationKey]]:
        """Their private conversations, emptied and marked deleted (the audit points at them); how many,
        how many items waited in them, and their threads' keys."""
        rows = await db.execute_fetchall(
            "SELECT c.id, c.platform, c.workspace, c.channel, c.thread, c.created_at, c.archived_at"
            f" FROM conversations c WHERE {_PRIVATE} ORDER BY c.id",
            (person.id, person.id),
        )
        waiting = 0
        keys: set[ConversationKey] = set()
        for conversation_id, *key, started, archived in rows:
            waiting += await self._empty_conversation(db, int(conversation_id), key, started, archived)
            keys.add(key_from_row(key))
        return len(rows), waiting, keys

    async def _redact_shared(self, db: Connection, person: Person) -> tuple[int, int]:
        """Their messages where others read too, and nerve's answers to each (up to the next person's
        message), replaced by a note; the rounds keep their shape for the model."""
        theirs = await db.execute_fetchall(
            "SELECT id, conversation_id, seq FROM messages WHERE author = ? AND role = 'user' ORDER BY id",
            (person.id,),
        )
        answers = 0
        for message_id, conversation_id, seq in theirs:
            await db.execute(
                "UPDATE messages SET content = ?, files = NULL, author = NULL, author_user = NULL"
                " WHERE id = ?",
                (MESSAGE_DELETED, message_id),
            )
            following = await db.execute_fetchall(
                "SELECT id, role, content, tool_calls FROM messages WHERE conversation_id = ? AND seq > ?"
                " AND seq < COALESCE((SELECT MIN(seq) FROM messages WHERE conversation_id = ? AND seq > ?"
                " AND role = 'user'), 9223372036854775807) ORDER BY seq",
                (conversation_id, seq, conversation_id, seq),
            )
            for answer_id, role, content, tool_calls in following:
                text = ANSWER_DELETED if content is not None or role == "tool" else None
                await db.execute(
                    "UPDATE messages SET content = ?, tool_calls = ? WHERE id = ?",
                    (text, _redacted_calls(tool_calls), answer_id),
                )
                answers += 1
        return len(theirs), answers

    async def _forget_waiting(self, db: Connection, person: Person) -> int:
        """Their parked turns (whole), their messages deferred behind one, tools' questions to them;
        their answers to questions asked of others lose their content."""
        people = _people_params(person)
        parked = await db.execute_fetchall(
            f"SELECT id FROM parked_turns WHERE {_PERSON_ROWS} AND requester = ?", (*people, person.user_id)
        )
        for table, column in PARKED_TABLES:
            await db.executemany(f"DELETE FROM {table} WHERE {column} = ?", parked)
        deferred = [
            (row[0],)
            for row in await db.execute_fetchall(
                f"SELECT id, incoming FROM deferred_messages WHERE {_PERSON_ROWS}", people
            )
            if json.loads(row[1]).get("user_id") == person.user_id
        ]
        await db.executemany("DELETE FROM deferred_messages WHERE id = ?", deferred)
        questions = await _count(
            db, f"DELETE FROM input_requests WHERE {_PERSON_ROWS} AND user_id = ?", (*people, person.user_id)
        )
        await db.execute(
            f"UPDATE input_requests SET content = NULL, answered_by = ? WHERE {_PERSON_ROWS}"
            " AND answered_by = ?",
            (FORGOTTEN_WRITER, *people, person.user_id),
        )
        return len(parked) + len(deferred) + questions

    async def _forget_schedules(self, db: Connection, person: Person) -> int:
        """Their schedules and each one's runs (the runs first: they point at their schedule)."""
        await db.execute(
            "DELETE FROM schedule_runs WHERE schedule_id IN (SELECT id FROM schedules WHERE owner = ?)",
            (person.id,),
        )
        return await _count(db, "DELETE FROM schedules WHERE owner = ?", (person.id,))

    async def _forget_sign_ins(self, db: Connection, person: Person) -> int:
        tokens = await _count(db, "DELETE FROM oauth_tokens WHERE person = ?", (person.id,))
        started = await _count(db, "DELETE FROM sign_ins WHERE person = ?", (person.id,))
        await db.execute("DELETE FROM sign_in_waits WHERE person = ?", (person.id,))
        return tokens + started

    async def _empty_inbox(self, db: Connection, person: Person) -> int:
        """Their deliveries not answered yet: emptied, as an answered one is (replay drops an empty one)."""
        rows = await db.execute_fetchall(
            "SELECT event_id, payload FROM inbox WHERE platform = ? AND status = 'received'",
            (person.platform,),
        )
        theirs = [(person.platform, event_id) for event_id, payload in rows if _names(payload, person)]
        await db.executemany("UPDATE inbox SET payload = '{}' WHERE platform = ? AND event_id = ?", theirs)
        return len(theirs)

    async def export_person(self, person: Person) -> dict[str, Any]:
        """Everything stored about `person`, as one JSON-able document; nothing of anyone else's
        except nerve's answers in their private conversations. Sign-ins are named, never their tokens."""
        document: dict[str, Any] = {
            "person": {
                "id": person.id,
                "platform": person.platform,
                "workspace": person.workspace,
                "user_id": person.user_id,
            }
        }
        async with self._read() as db:
            document["private_conversations"] = await self._private_export(db, person)
            for section in _SECTIONS:
                by_user = (*_people_params(person), person.user_id)
                params = (person.id,) * section.by_id if section.by_id else by_user
                rows = await db.execute_fetchall(section.sql, params)
                document[section.name] = [dict(zip(section.columns, row, strict=True)) for row in rows]
            deferred = await db.execute_fetchall(
                f"SELECT incoming, received_at FROM deferred_messages WHERE {_PERSON_ROWS} ORDER BY id",
                _people_params(person),
            )
        for memory in document["memories"]:
            memory["anywhere"] = bool(memory["anywhere"])
            memory["saved_by_you"] = memory.pop("written_by") == person.id
        for question in document["questions"]:
            question["answer"] = json.loads(question["answer"]) if question["answer"] is not None else None
        document["waiting_messages"] = [
            {**data["key"], "text": data.get("text"), "at": at}
            for data, at in ((json.loads(raw), at) for raw, at in deferred)
            if data.get("user_id") == person.user_id
        ]
        return document

    async def _private_export(self, db: Connection, person: Person) -> list[dict[str, Any]]:
        """Their private conversations whole, nerve's answers and tools' results with their messages."""
        found = await db.execute_fetchall(
            "SELECT c.id, c.platform, c.workspace, c.channel, c.thread, c.created_at, c.archived_at"
            f" FROM conversations c WHERE {_PRIVATE} ORDER BY c.id",
            (person.id, person.id),
        )
        conversations = []
        for conversation_id, *key, started, archived in found:
            rows = await db.execute_fetchall(
                f"SELECT {MESSAGE_COLUMNS}, created_at FROM messages WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            )
            messages = [{"at": row[-1], **message_to_json(message_from_row(row[:-1]))} for row in rows]
            where = dict(zip(_KEY, key, strict=True))
            times = {"started_at": started, "archived_at": archived}
            conversations.append({"id": conversation_id, **where, **times, "messages": messages})
        return conversations


@dataclass(frozen=True, slots=True)
class _Section:
    """One list of an export: its rows' `columns` named as the document names them. The person is
    the parameter `by_id` times by their id, or (0) by their platform's user id (`_PERSON_ROWS`)."""

    name: str
    columns: tuple[str, ...]
    sql: str
    by_id: int = 0


_KEY = ("platform", "workspace", "channel", "thread")
_SECTIONS = (
    _Section(
        "memories",
        ("id", "kind", "subject", "text", "anywhere", "written_by", "saved_in", "created_at"),
        "SELECT id, kind, subject, text, anywhere, written_by, written_in, created_at FROM memories"
        " WHERE (kind = 'person' AND subject = ?) OR written_by = ? ORDER BY created_at, id",
        by_id=2,
    ),
    _Section(
        "messages",
        (*_KEY, "text", "at"),
        "SELECT c.platform, c.workspace, c.channel, c.thread, m.content, m.created_at FROM messages m"
        f" JOIN conversations c ON c.id = m.conversation_id WHERE m.author = ? AND m.role = 'user'"
        f" AND NOT ({_PRIVATE}) ORDER BY m.id",
        by_id=3,
    ),
    _Section(
        "approvals",
        ("at", *_KEY, "place", "server", "tool", "call_id", "outcome"),
        "SELECT a.at, c.platform, c.workspace, c.channel, c.thread, a.place, a.server, a.tool, a.call_id,"
        " a.outcome FROM audit a JOIN conversations c ON c.id = a.conversation_id"
        " WHERE c.platform = ? AND (CAST(? AS TEXT) IS NULL OR c.workspace = ?) AND a.who = ? ORDER BY a.id",
    ),
    _Section(
        "feedback",
        (*_KEY, "message", "rating", "at"),
        "SELECT platform, workspace, channel, thread, message_ts, rating, created_at FROM feedback"
        f" WHERE {_PERSON_ROWS} AND user_id = ? ORDER BY created_at",
    ),
    _Section(
        "questions",
        (*_KEY, "server", "question", "status", "answer", "asked_at", "answered_at"),
        "SELECT platform, workspace, channel, thread, server, message, status, content, created_at,"
        f" answered_at FROM input_requests WHERE {_PERSON_ROWS} AND user_id = ? ORDER BY rowid",
    ),
    _Section(
        "schedules",
        (
            "id",
            *_KEY,
            "place",
            "prompt",
            "first_at",
            "rule",
            "timezone",
            "status",
            "created_at",
            "last_slot",
            "last_outcome",
        ),
        "SELECT id, platform, workspace, channel, thread, place, prompt, first_at, rule, timezone, status,"
        " created_at, last_slot, last_outcome FROM schedules WHERE owner = ? ORDER BY created_at, id",
        by_id=1,
    ),
    _Section(
        "schedule_runs",
        ("schedule_id", "slot", "status", "started_at", "finished_at", "late_by", "note"),
        "SELECT r.schedule_id, r.slot, r.status, r.started_at, r.finished_at, r.late_by, r.note"
        " FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id WHERE s.owner = ?"
        " ORDER BY r.schedule_id, r.slot",
        by_id=1,
    ),
    _Section(
        "files",
        (*_KEY, "id", "name", "kind", "mime", "size", "summary", "at"),
        "SELECT c.platform, c.workspace, c.channel, c.thread, f.id, f.name, f.kind, f.mime, f.size,"
        " f.summary, f.created_at FROM files f JOIN conversations c ON c.id = f.conversation_id"
        " WHERE f.author = ? ORDER BY f.created_at, f.id",
        by_id=1,
    ),
    _Section(
        "settings",
        ("time_zone", "changed_at"),
        "SELECT time_zone, changed_at FROM person_settings WHERE person = ?",
        by_id=1,
    ),
    _Section(
        "sign_ins",
        ("server", "scope", "since"),
        "SELECT server, scope, updated_at FROM oauth_tokens WHERE person = ? ORDER BY server",
        by_id=1,
    ),
)


async def _count(db: Connection, sql: str, params: Sequence[Any]) -> int:
    """One statement's changed rows (never negative)."""
    return max((await db.execute(sql, params)).rowcount, 0)

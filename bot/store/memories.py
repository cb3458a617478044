"""What people asked nerve to remember, and the database's own ranking of it against a question.

Every read names whose memories it may see (`MemoryScope`): the scope is part of each query's WHERE
clause, never a filter applied afterwards, so no path can return another person's memory. Ranking is
the database's full-text search (SQLite FTS5's bm25, PostgreSQL's ts_rank), then recency.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.store.dialect import Ledger, days_ago
from bot.types import Memory, MemoryKind

# The words of a question the full-text search looks for: letters and digits only, so nothing in a
# question can be read as the search syntax of either database.
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_SEARCH_WORDS = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryScope:
    """Whose memories one turn may see: its person's (all of them where `private`, else only those
    marked `anywhere`) and its place's. Nobody else's personal memory is ever in reach."""

    person: str
    place: str
    private: bool

    def where(self) -> tuple[str, tuple[Any, ...]]:
        mine = "(m.kind = 'person' AND m.subject = ?" + ("" if self.private else " AND m.anywhere = 1") + ")"
        return f"({mine} OR (m.kind = 'place' AND m.subject = ?))", (self.person, self.place)


_COLUMNS = "m.id, m.kind, m.subject, m.text, m.anywhere, m.written_by, m.written_in, m.created_at"


_NEWEST = "m.created_at DESC, m.seq DESC"


def _memory(row: Any) -> Memory:
    id_, kind, subject, text, anywhere, written_by, written_in, created_at = row[:8]
    return Memory(
        id=id_,
        kind=kind,
        subject=subject,
        text=text,
        anywhere=bool(anywhere),
        written_by=written_by,
        written_in=written_in,
        created_at=created_at,
    )


def new_memory_id() -> str:
    """Short enough for a person to type (`forget m3f9a2c1`), random enough never to collide."""
    return "m" + secrets.token_hex(4)


def search_words(query: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(query)][:MAX_SEARCH_WORDS]


class MemoryLedger(Ledger):
    async def add_memory(
        self, *, kind: MemoryKind, subject: str, text: str, anywhere: bool, written_by: str, written_in: str
    ) -> Memory:
        memory_id = new_memory_id()
        await self._change(
            "INSERT INTO memories (id, kind, subject, text, anywhere, written_by, written_in)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (memory_id, kind, subject, text, int(anywhere), written_by, written_in),
        )
        found = await self.memory(memory_id)
        assert found is not None
        return found

    async def memory(self, memory_id: str) -> Memory | None:
        row = await self._first(f"SELECT {_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,))
        return _memory(row) if row else None

    async def delete_memory(self, memory_id: str) -> bool:
        return await self._change("DELETE FROM memories WHERE id = ?", (memory_id,)) > 0

    async def delete_memories_of(self, person: str) -> int:
        """Every personal memory of one person."""
        return await self._change("DELETE FROM memories WHERE kind = 'person' AND subject = ?", (person,))

    async def prune_memories(self, older_than_days: float, now: datetime | None = None) -> int:
        """Every memory saved over `older_than_days` ago (NERVE_MEMORY_RETENTION); returns how many."""
        return await self._change(
            "DELETE FROM memories WHERE created_at < ?", (days_ago(older_than_days, now),)
        )

    async def set_memory_anywhere(self, memory_id: str, anywhere: bool) -> bool:
        return (
            await self._change("UPDATE memories SET anywhere = ? WHERE id = ?", (int(anywhere), memory_id))
            > 0
        )

    async def memories_of(
        self, *, person: str | None = None, place: str | None = None, limit: int = 200
    ) -> list[Memory]:
        """A person's own memories and/or a place's, newest first: what the lists show."""
        clauses: list[str] = []
        params: list[Any] = []
        if person is not None:
            clauses.append("(m.kind = 'person' AND m.subject = ?)")
            params.append(person)
        if place is not None:
            clauses.append("(m.kind = 'place' AND m.subject = ?)")
            params.append(place)
        where = " OR ".join(clauses) if clauses else "1 = 1"
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM memories m WHERE {where} ORDER BY {_NEWEST} LIMIT ?",
            (*params, limit),
        )
        return [_memory(row) for row in rows]

    async def recent_memories(self, scope: MemoryScope, limit: int) -> list[Memory]:
        """The memories a turn may see, newest first."""
        where, params = scope.where()
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM memories m WHERE {where} ORDER BY {_NEWEST} LIMIT ?",
            (*params, limit),
        )
        return [_memory(row) for row in rows]

    async def search_memories(self, scope: MemoryScope, query: str, limit: int) -> list[Memory]:
        """The memories a turn may see that share words with `query`, most relevant first, then newest."""
        words = search_words(query)
        if not words:
            return []
        where, params = scope.where()
        if self._sql.name == "sqlite":
            # Each word quoted: FTS5 reads it as a plain term, whatever it spells.
            match = " OR ".join('"' + word.replace('"', "") + '"' for word in words)
            sql = (
                f"SELECT {_COLUMNS}, bm25(memories_search) AS score FROM memories_search"
                " JOIN memories m ON m.seq = memories_search.rowid"
                f" WHERE memories_search MATCH ? AND {where}"
                " ORDER BY score, m.created_at DESC LIMIT ?"
            )
            rows = await self._rows(sql, (match, *params, limit))
        else:
            # plainto_tsquery of each word, OR-ed: no word can be read as tsquery syntax.
            terms = " || ".join("plainto_tsquery('english', ?)" for _ in words)
            sql = (
                f"SELECT {_COLUMNS}, ts_rank(m.search, q) AS score"
                f" FROM memories m, ({'SELECT ' + terms}) AS found (q)"
                f" WHERE m.search @@ q AND {where}"
                " ORDER BY score DESC, m.created_at DESC LIMIT ?"
            )
            rows = await self._rows(sql, (*words, *params, limit))
        return [_memory(row) for row in rows]

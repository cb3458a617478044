-- What people asked nerve to remember (as migrations/0013_memories.sql). The full-text index is a
-- generated tsvector with a GIN index: PostgreSQL's own ranking (ts_rank), no copy of the text.
CREATE TABLE memories (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY,
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('person', 'place')),
    subject    TEXT NOT NULL,
    text       TEXT NOT NULL,
    anywhere   INTEGER NOT NULL DEFAULT 0 CHECK (anywhere IN (0, 1)),
    written_by TEXT NOT NULL,
    written_in TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    search     TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);

CREATE INDEX memories_by_subject ON memories (kind, subject, created_at);
CREATE INDEX memories_by_writer ON memories (written_by);
CREATE INDEX memories_search ON memories USING GIN (search);

-- Files people shared with a message, kept with their conversation (as migrations/0018_files.sql);
-- the file ids of a user message; what a model was found unable to take.
CREATE TABLE files (
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY,
    id              TEXT PRIMARY KEY,
    conversation_id BIGINT NOT NULL REFERENCES conversations (id),
    author          TEXT,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('image', 'text', 'pdf')),
    mime            TEXT NOT NULL,
    size            BIGINT NOT NULL,
    text            TEXT NOT NULL DEFAULT '',
    summary         TEXT NOT NULL DEFAULT '',
    image           BYTEA,
    image_mime      TEXT,
    created_at      TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);

CREATE INDEX files_by_conversation ON files (conversation_id);
CREATE INDEX files_by_author ON files (author) WHERE author IS NOT NULL;

ALTER TABLE messages ADD COLUMN files TEXT;

CREATE TABLE model_abilities (
    model      TEXT PRIMARY KEY,
    no_images  INTEGER NOT NULL DEFAULT 0 CHECK (no_images IN (0, 1)),
    changed_at TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
);

-- Files people shared with a message (bot/store/files.py): what nerve read of each, kept with its
-- conversation so a later turn (and `read_attachment`) reaches it; deleted with the conversation
-- (reset and delete, NERVE_RETENTION_DAYS, forget-me). The raw bytes are never kept: only the text
-- read from a document and, for an image, its scaled copy with the metadata stripped.
-- id: the id the model names it by (`f_…`); author: the person who shared it, as messages.author.
CREATE TABLE files (
    id              TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    author          TEXT,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('image', 'text', 'pdf')),
    mime            TEXT NOT NULL,
    size            INTEGER NOT NULL,
    text            TEXT NOT NULL DEFAULT '',
    summary         TEXT NOT NULL DEFAULT '',
    image           BLOB,
    image_mime      TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX files_by_conversation ON files (conversation_id);
CREATE INDEX files_by_author ON files (author) WHERE author IS NOT NULL;

-- The ids of the files shared with a user message, a JSON list; NULL when none.
ALTER TABLE messages ADD COLUMN files TEXT CHECK (files IS NULL OR json_valid(files));

-- What a model was found unable to take (NERVE_VISION=auto): a provider that refused image input
-- once is not sent images again, after a restart too. One row per model name.
CREATE TABLE model_abilities (
    model      TEXT PRIMARY KEY,
    no_images  INTEGER NOT NULL DEFAULT 0 CHECK (no_images IN (0, 1)),
    changed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- What people asked nerve to remember: about themselves (kind 'person', subject their person id, as
-- sign-ins key people) or about a place (kind 'place', subject the place: a channel, a DM, a server).
-- anywhere = 1: a personal memory its person lets nerve use in shared places too (default: only in
-- their DMs and the terminal, because an answer in a channel is read by everyone there).
-- written_by / written_in: who saved it and where, for the list and for who may remove it.
-- seq: the order of saving, and the full-text index's key: an INTEGER PRIMARY KEY, which no VACUUM
-- renumbers under the index (an implicit rowid may be).
CREATE TABLE memories (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL CHECK (kind IN ('person', 'place')),
    subject    TEXT NOT NULL,
    text       TEXT NOT NULL,
    anywhere   INTEGER NOT NULL DEFAULT 0 CHECK (anywhere IN (0, 1)),
    written_by TEXT NOT NULL,
    written_in TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX memories_by_subject ON memories (kind, subject, created_at);
CREATE INDEX memories_by_writer ON memories (written_by);

-- The database's own full-text index ranks memories by relevance to a question (bm25). It holds no
-- copy of the text (content=): a forgotten memory leaves nothing behind in it.
CREATE VIRTUAL TABLE memories_search USING fts5 (
    text, content = 'memories', content_rowid = 'seq', tokenize = 'porter unicode61'
);

CREATE TRIGGER memories_indexed AFTER INSERT ON memories BEGIN
    INSERT INTO memories_search (rowid, text) VALUES (new.rowid, new.text);
END;

CREATE TRIGGER memories_unindexed AFTER DELETE ON memories BEGIN
    INSERT INTO memories_search (memories_search, rowid, text) VALUES ('delete', old.rowid, old.text);
END;

CREATE TRIGGER memories_reindexed AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_search (memories_search, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO memories_search (rowid, text) VALUES (new.rowid, new.text);
END;

-- The first schema: conversations per thread, their messages, and the inbox of platform events.
-- Forward-only: never edit this file once released; add 0002_….sql instead.
-- Timestamps are UTC ISO-8601 with milliseconds (SQLite 3.40 has no unixepoch('subsec')).

-- One row per conversation. A thread keeps its old conversations after a reset (archived_at set);
-- only the active one (archived_at IS NULL) is loaded and sent to the model.
CREATE TABLE conversations (
    id          INTEGER PRIMARY KEY,
    platform    TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    channel     TEXT NOT NULL,
    thread      TEXT NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    archived_at TEXT
);

-- At most one active conversation per thread, so two writers can never split a thread in two.
CREATE UNIQUE INDEX conversations_one_active
    ON conversations (platform, workspace, channel, thread)
    WHERE archived_at IS NULL;

-- Messages in the chat-completions shape, ordered by seq within their conversation.
-- tool_calls is the JSON list [{"id", "name", "arguments"}] written with json.dumps, never by hand.
-- event_id is the platform's delivery id of a user message: a re-delivery finds it and becomes a no-op.
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content         TEXT,
    tool_calls      TEXT CHECK (tool_calls IS NULL OR json_valid(tool_calls)),
    tool_call_id    TEXT,
    name            TEXT,
    is_error        INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    latency_ms      REAL,
    event_id        TEXT,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (conversation_id, seq),
    -- A tool result without the id of its call cannot be sent back to the model.
    CHECK (role <> 'tool' OR tool_call_id IS NOT NULL)
);

CREATE UNIQUE INDEX messages_one_event
    ON messages (conversation_id, event_id)
    WHERE event_id IS NOT NULL;

-- Platform events as received, before any work is done on them: a claimed event is never answered
-- twice, and events still 'received' at start-up are the ones a crash interrupted.
CREATE TABLE inbox (
    platform    TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    payload     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'received' CHECK (status IN ('received', 'done')),
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    done_at     TEXT,
    PRIMARY KEY (platform, event_id)
);

CREATE INDEX inbox_by_status ON inbox (platform, status, received_at);

-- What MCP servers asked people during a call (elicitation): one row per request, answered once.
-- The process waiting on a request refreshes alive_at while it waits; a request still open whose
-- alive_at is old belongs to a process that stopped, and its server's question is gone with it.
CREATE TABLE input_requests (
    id         TEXT PRIMARY KEY,
    platform   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    channel    TEXT NOT NULL,
    thread     TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    server     TEXT NOT NULL,
    tools      TEXT NOT NULL,
    message    TEXT NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('form', 'url')),
    schema     TEXT,
    url        TEXT,
    refused    TEXT,
    status     TEXT NOT NULL DEFAULT 'open'
        CHECK (status IN ('open', 'accepted', 'declined', 'cancelled', 'expired', 'ended')),
    content    TEXT,
    answered_by TEXT,
    expires_at REAL NOT NULL,
    alive_at   REAL NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    answered_at TEXT
);

CREATE INDEX input_requests_open ON input_requests (status, platform);

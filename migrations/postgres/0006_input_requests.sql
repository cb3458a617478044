-- What MCP servers asked people during a call (elicitation), answered once
-- (as migrations/0006_input_requests.sql). alive_at and expires_at are Unix seconds.
CREATE TABLE input_requests (
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT PRIMARY KEY,
    platform    TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    channel     TEXT NOT NULL,
    thread      TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    server      TEXT NOT NULL,
    tools       TEXT NOT NULL,
    message     TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('form', 'url')),
    schema      TEXT,
    url         TEXT,
    refused     TEXT,
    status      TEXT NOT NULL DEFAULT 'open'
        CHECK (status IN ('open', 'accepted', 'declined', 'cancelled', 'expired', 'ended')),
    content     TEXT,
    answered_by TEXT,
    expires_at  DOUBLE PRECISION NOT NULL,
    alive_at    DOUBLE PRECISION NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    answered_at TEXT
);

CREATE INDEX input_requests_open ON input_requests (status, platform);

-- Trust and control: turns parked while a person decides on their tool calls, the calls waiting,
-- approvals remembered per place, the audit of every decision, and messages that arrived in a thread
-- while its turn was parked. Any process on this file can resume a parked turn.
-- expires_at is Unix seconds (compared with the caller's clock); other times are UTC ISO-8601.

-- One row per approval request: the round whose calls wait, and what the turn needs to go on.
CREATE TABLE parked_turns (
    id           TEXT PRIMARY KEY,
    platform     TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    channel      TEXT NOT NULL,
    thread       TEXT NOT NULL,
    requester    TEXT NOT NULL,
    place        TEXT NOT NULL,
    -- The Incoming that started the turn (JSON), so the turn resumes with the same question and place.
    incoming     TEXT NOT NULL CHECK (json_valid(incoming)),
    -- The assistant message whose calls wait (JSON), and the tool messages of its calls that already ran.
    answer       TEXT NOT NULL CHECK (json_valid(answer)),
    done_results TEXT NOT NULL CHECK (json_valid(done_results)),
    rounds_used  INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'waiting' CHECK (status IN ('waiting', 'resuming', 'done')),
    -- When a process took it for resuming (Unix seconds), for operators reading the table.
    claimed_at   REAL,
    message_ref  TEXT,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    expires_at   REAL NOT NULL
);

CREATE INDEX parked_turns_by_thread ON parked_turns (platform, workspace, channel, thread, status);
CREATE INDEX parked_turns_by_expiry ON parked_turns (status, expires_at);

-- The calls of a request that wait for a person; each runs only as shown (call_hash).
CREATE TABLE pending_calls (
    request_id      TEXT NOT NULL REFERENCES parked_turns (id),
    call_id         TEXT NOT NULL,
    position        INTEGER NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    arguments       TEXT NOT NULL CHECK (json_valid(arguments)),
    call_hash       TEXT NOT NULL,
    definition_hash TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    decided_by      TEXT,
    decided_at      TEXT,
    PRIMARY KEY (request_id, call_id)
);

-- "Always allow here": a tool approved for a place, as long as its definition stays the same.
CREATE TABLE remembered_approvals (
    place           TEXT NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    definition_hash TEXT NOT NULL,
    granted_by      TEXT NOT NULL,
    granted_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (place, server, tool)
);

-- Every decision on a tool call, by a person or automatic, kept with its conversation.
CREATE TABLE audit (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id),
    at              TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    who             TEXT NOT NULL,
    place           TEXT NOT NULL,
    server          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    arguments_hash  TEXT NOT NULL,
    outcome         TEXT NOT NULL
);

CREATE INDEX audit_by_conversation ON audit (conversation_id, id);

-- Messages written in a thread while its turn waited for a person: answered, in order, after it.
CREATE TABLE deferred_messages (
    id          INTEGER PRIMARY KEY,
    platform    TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    channel     TEXT NOT NULL,
    thread      TEXT NOT NULL,
    incoming    TEXT NOT NULL CHECK (json_valid(incoming)),
    received_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX deferred_messages_by_thread ON deferred_messages (platform, workspace, channel, thread, id);

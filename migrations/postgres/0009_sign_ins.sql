-- Per-person sign-in to remote MCP servers (as migrations/0009_sign_ins.sql). Tokens, registrations
-- and started flows are stored encrypted (NERVE_SECRET_KEY) in bytea; times are Unix seconds.
CREATE TABLE oauth_tokens (
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    issuer     TEXT NOT NULL DEFAULT '',
    secret     BYTEA NOT NULL,
    scope      TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, person)
);

CREATE TABLE oauth_clients (
    server     TEXT NOT NULL,
    identity   TEXT NOT NULL,
    secret     BYTEA NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, identity)
);

CREATE TABLE sign_ins (
    state      TEXT PRIMARY KEY,
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    platform   TEXT NOT NULL DEFAULT '',
    workspace  TEXT NOT NULL DEFAULT '',
    channel    TEXT NOT NULL DEFAULT '',
    thread     TEXT NOT NULL DEFAULT '',
    secret     BYTEA NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX sign_ins_by_person ON sign_ins (server, person);

CREATE TABLE sign_in_waits (
    request_id TEXT NOT NULL REFERENCES parked_turns (id),
    call_id    TEXT NOT NULL,
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    PRIMARY KEY (request_id, call_id)
);
CREATE INDEX sign_in_waits_by_person ON sign_in_waits (server, person);

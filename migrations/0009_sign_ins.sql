-- Per-person sign-in to remote MCP servers (OAuth). Tokens and client registrations are stored
-- encrypted (NERVE_SECRET_KEY); nothing here is readable without the key.
--
-- oauth_tokens: one person's tokens for one server, from one issuer. A changed issuer (the server
-- moved to another authorization server) makes the row useless: it is replaced at the next sign-in.
CREATE TABLE oauth_tokens (
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    issuer     TEXT NOT NULL DEFAULT '',
    secret     BLOB NOT NULL,
    scope      TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (server, person)
);

-- oauth_clients: how nerve is registered with a server's authorization server (shared by everyone).
CREATE TABLE oauth_clients (
    server     TEXT NOT NULL,
    identity   TEXT NOT NULL,
    secret     BLOB NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (server, identity)
);

-- sign_ins: an authorization started and not finished. `state` is the single-use key the browser
-- brings back; the flow (PKCE verifier, discovered metadata) is encrypted in `secret`.
CREATE TABLE sign_ins (
    state      TEXT PRIMARY KEY,
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    platform   TEXT NOT NULL DEFAULT '',
    workspace  TEXT NOT NULL DEFAULT '',
    channel    TEXT NOT NULL DEFAULT '',
    thread     TEXT NOT NULL DEFAULT '',
    secret     BLOB NOT NULL,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX sign_ins_by_person ON sign_ins (server, person);

-- sign_in_waits: a parked call that waits for its person to sign in to its server.
CREATE TABLE sign_in_waits (
    request_id TEXT NOT NULL REFERENCES parked_turns (id),
    call_id    TEXT NOT NULL,
    server     TEXT NOT NULL,
    person     TEXT NOT NULL,
    PRIMARY KEY (request_id, call_id)
);
CREATE INDEX sign_in_waits_by_person ON sign_in_waits (server, person);

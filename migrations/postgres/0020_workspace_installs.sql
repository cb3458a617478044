-- Installs of the bot in many workspaces (as migrations/0020_workspace_installs.sql): the
-- installation, its tokens among it, encrypted (NERVE_SECRET_KEY) in bytea; times are Unix seconds.
CREATE TABLE workspace_installs (
    platform     TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    enterprise   TEXT NOT NULL DEFAULT '',
    org_wide     INTEGER NOT NULL DEFAULT 0,
    name         TEXT NOT NULL DEFAULT '',
    secret       BYTEA NOT NULL,
    installed_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (platform, workspace)
);

CREATE TABLE install_states (
    state      TEXT PRIMARY KEY,
    expires_at DOUBLE PRECISION NOT NULL
);

-- Installs of the bot in many workspaces (a platform's install flow). `secret` holds the whole installation
-- (its tokens among it) encrypted with NERVE_SECRET_KEY; nothing here is readable without the key.
--
-- workspace_installs: one row per installed workspace; `workspace` is the team id, or the
-- organization id for an organization-wide install (`org_wide`). `enterprise` is the organization
-- the install belongs to ('' outside Enterprise Grid): a lookup must name the same one.
CREATE TABLE workspace_installs (
    platform     TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    enterprise   TEXT NOT NULL DEFAULT '',
    org_wide     INTEGER NOT NULL DEFAULT 0,
    name         TEXT NOT NULL DEFAULT '',
    secret       BLOB NOT NULL,
    installed_at REAL NOT NULL,
    PRIMARY KEY (platform, workspace)
);

-- install_states: the single-use `state` of an install under way, good until `expires_at`.
CREATE TABLE install_states (
    state      TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);

-- What every model request used (bot/store/usage.py), one row each: written as a reservation (the
-- request's estimate, settled = 0) in the same transaction as the budget check, then settled with the
-- provider's figures when the answer came. Budgets sum these rows per person, place and workspace.
-- turn: the event id of the message the turn answers (NULL for one without); conversation: its key.
-- person: as sign-ins and memories key people, NULL once the person asked to be forgotten (the
-- figures stay for the place's and workspace's totals). place: as the policy names it (slack:C123);
-- workspace: platform:workspace. cost: money at the configured price, NULL when the model has none.
-- estimated: 1 when the provider sent no usage and the figures are nerve's own estimate.
-- at: UTC epoch seconds of the request.
CREATE TABLE model_usage (
    id                TEXT PRIMARY KEY,
    turn              TEXT,
    conversation      TEXT NOT NULL,
    person            TEXT,
    place             TEXT NOT NULL,
    workspace         TEXT NOT NULL,
    platform          TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost              REAL,
    estimated         INTEGER NOT NULL DEFAULT 0 CHECK (estimated IN (0, 1)),
    settled           INTEGER NOT NULL DEFAULT 0 CHECK (settled IN (0, 1)),
    at                REAL NOT NULL
);

CREATE INDEX model_usage_by_person ON model_usage (person, at) WHERE person IS NOT NULL;
CREATE INDEX model_usage_by_place ON model_usage (place, at);
CREATE INDEX model_usage_by_workspace ON model_usage (workspace, at);
CREATE INDEX model_usage_by_time ON model_usage (at);

-- What every model request used (as migrations/0019_usage.sql): a reservation checked against the
-- budgets in one transaction, settled with the provider's figures; person NULL once forgotten.
CREATE TABLE model_usage (
    rowid             BIGINT GENERATED ALWAYS AS IDENTITY,
    id                TEXT PRIMARY KEY,
    turn              TEXT,
    conversation      TEXT NOT NULL,
    person            TEXT,
    place             TEXT NOT NULL,
    workspace         TEXT NOT NULL,
    platform          TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    cached_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cost              DOUBLE PRECISION,
    estimated         INTEGER NOT NULL DEFAULT 0 CHECK (estimated IN (0, 1)),
    settled           INTEGER NOT NULL DEFAULT 0 CHECK (settled IN (0, 1)),
    at                DOUBLE PRECISION NOT NULL
);

CREATE INDEX model_usage_by_person ON model_usage (person, at) WHERE person IS NOT NULL;
CREATE INDEX model_usage_by_place ON model_usage (place, at);
CREATE INDEX model_usage_by_workspace ON model_usage (workspace, at);
CREATE INDEX model_usage_by_time ON model_usage (at);

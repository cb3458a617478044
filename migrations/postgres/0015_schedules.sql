-- Schedules and their runs (as migrations/0015_schedules.sql): instants are UTC epoch seconds, and
-- (schedule_id, slot) is the key that lets one claim of a slot succeed, across every process.
CREATE TABLE schedules (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    owner_user   TEXT NOT NULL,
    platform     TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    channel      TEXT NOT NULL,
    thread       TEXT NOT NULL,
    place        TEXT NOT NULL DEFAULT '',
    prompt       TEXT NOT NULL,
    first_at     DOUBLE PRECISION NOT NULL,
    rule         TEXT NOT NULL DEFAULT '',
    timezone     TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'paused', 'cancelled', 'done')),
    created_at   DOUBLE PRECISION NOT NULL,
    changed_by   TEXT,
    changed_at   DOUBLE PRECISION,
    last_slot    DOUBLE PRECISION,
    last_outcome TEXT
);

CREATE INDEX schedules_by_owner ON schedules (owner, status);
CREATE INDEX schedules_by_status ON schedules (status);

CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    slot        DOUBLE PRECISION NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'answered', 'failed', 'missed')),
    started_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    late_by     DOUBLE PRECISION NOT NULL DEFAULT 0,
    note        TEXT,
    PRIMARY KEY (schedule_id, slot)
);

CREATE INDEX schedule_runs_running ON schedule_runs (started_at) WHERE status = 'running';

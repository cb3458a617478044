-- Schedules: prompts people asked nerve to run later, once or on a recurrence (bot/schedules), and
-- each slot's run. Every instant is UTC epoch seconds (REAL), as bot/schedules/timing.py counts them.
-- owner: the person's id as sign-ins and memories key people; owner_user: their platform's user id,
-- which a run's turn is started as. platform/workspace/channel/thread: the conversation it was made
-- in, where its runs answer; place: that place as a person reads it ('' when there is no better name).
-- rule: an RFC 5545 RRULE expanded in `timezone`'s wall time, '' for once.
-- changed_by / changed_at: who last paused, resumed, cancelled it (or ended it: 'nerve').
-- last_slot / last_outcome: the newest slot run or recorded missed, and how it went.
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
    first_at     REAL NOT NULL,
    rule         TEXT NOT NULL DEFAULT '',
    timezone     TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'paused', 'cancelled', 'done')),
    created_at   REAL NOT NULL,
    changed_by   TEXT,
    changed_at   REAL,
    last_slot    REAL,
    last_outcome TEXT
);

CREATE INDEX schedules_by_owner ON schedules (owner, status);
CREATE INDEX schedules_by_status ON schedules (status);

-- One row per slot that was claimed to run or recorded missed. The primary key is the exactly-once
-- guarantee: a slot is claimed by inserting its row, and only one insert of (schedule_id, slot) can
-- succeed, whichever process, restart or re-delivery tries; a missed slot's row keeps it from
-- running later. late_by: seconds between the slot and the run's start.
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    slot        REAL NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'answered', 'failed', 'missed')),
    started_at  REAL NOT NULL,
    finished_at REAL,
    late_by     REAL NOT NULL DEFAULT 0,
    note        TEXT,
    PRIMARY KEY (schedule_id, slot)
);

CREATE INDEX schedule_runs_running ON schedule_runs (started_at) WHERE status = 'running';

-- Thumbs up / down on answers, one vote per person per answer message (as migrations/0005_feedback.sql).
CREATE TABLE feedback (
    platform   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    channel    TEXT NOT NULL,
    thread     TEXT NOT NULL,
    message_ts TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    rating     TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    event_id   TEXT,
    created_at TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    PRIMARY KEY (platform, workspace, channel, message_ts, user_id)
);

CREATE INDEX feedback_by_thread ON feedback (platform, workspace, channel, thread);

-- Thumbs up / down on answers. One vote per person per answer message: a second click replaces the
-- first. The answer is found by its conversation (platform, workspace, channel, thread) and its
-- message; event_id is the delivery id of the question it answered, when the platform gave one.
CREATE TABLE feedback (
    platform   TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    channel    TEXT NOT NULL,
    thread     TEXT NOT NULL,
    message_ts TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    rating     TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    event_id   TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (platform, workspace, channel, message_ts, user_id)
);

CREATE INDEX feedback_by_thread ON feedback (platform, workspace, channel, thread);

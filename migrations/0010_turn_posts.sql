-- What each turn has posted, one row per part of its answer ("live" for the message that shows
-- progress, "answer:0", "answer:1", … for the messages of the answer, "files" for its uploads).
-- A row is written before the post (ref NULL: on its way) and completed with where it landed, so a
-- turn answered again (after a crash, or as a job retried on another replica) edits or skips what
-- is already out instead of posting it twice. A row left without ref is in doubt: the post may or
-- may not have landed, and the platform is asked (Slack message metadata names the turn and part).
CREATE TABLE turn_posts (
    turn       TEXT NOT NULL,
    part       TEXT NOT NULL,
    ref        TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (turn, part)
);

CREATE INDEX turn_posts_by_age ON turn_posts (created_at);

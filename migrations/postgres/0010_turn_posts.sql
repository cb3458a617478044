-- What each turn has posted, one row per part of its answer (as migrations/0010_turn_posts.sql).
CREATE TABLE turn_posts (
    turn       TEXT NOT NULL,
    part       TEXT NOT NULL,
    ref        TEXT,
    created_at TEXT NOT NULL DEFAULT (to_char(statement_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    PRIMARY KEY (turn, part)
);

CREATE INDEX turn_posts_by_age ON turn_posts (created_at);

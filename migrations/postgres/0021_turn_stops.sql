-- The stop button pressed in one process for a turn another process runs (as
-- migrations/0021_turn_stops.sql). `turn` names the turn holding the conversation's advisory lock
-- when the stop was pressed (the lock session's application_name, bot/store/postgres.py).
CREATE TABLE turn_stops (
    turn         TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    expires_at   DOUBLE PRECISION NOT NULL
);

CREATE INDEX turn_stops_by_turn ON turn_stops (turn);

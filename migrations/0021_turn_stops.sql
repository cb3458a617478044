-- The stop button pressed in one process for a turn another process runs (adapters/slack/stops.py).
-- `turn` names the turn holding the conversation when the stop was pressed (its turn_locks ticket's
-- `turn`): a request can only ever stop that one turn, never a later one of the same thread. The
-- process running it looks for requests while it works, and deletes them once it has read them;
-- the process that recorded one deletes it when no turn took it in time, and any past `expires_at`
-- (Unix seconds) is deleted with the next request.
CREATE TABLE turn_stops (
    turn         TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    expires_at   REAL NOT NULL
);

CREATE INDEX turn_stops_by_turn ON turn_stops (turn);

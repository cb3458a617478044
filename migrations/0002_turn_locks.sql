-- The queue of turns per conversation, shared by every process on this file (bot/store/thread_lock.py).
-- A turn takes a ticket when it arrives; the live ticket with the lowest number holds the conversation,
-- so turns run one at a time in arrival order. AUTOINCREMENT: a number is never handed out twice, so a
-- late ticket can never sort before an earlier one.
-- expires_at (Unix seconds) is pushed forward by the owner while its turn waits or runs; a ticket past
-- it belongs to a process that stopped, and the next waiter deletes it.
CREATE TABLE turn_locks (
    ticket     INTEGER PRIMARY KEY AUTOINCREMENT,
    lock_key   TEXT NOT NULL,
    owner      TEXT NOT NULL,
    turn       TEXT NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX turn_locks_by_key ON turn_locks (lock_key, ticket);
CREATE INDEX turn_locks_by_turn ON turn_locks (turn);

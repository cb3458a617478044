-- Questions asked in the result of a call park their turn (as migrations/0007_parked_questions.sql).
CREATE TABLE input_waits (
    request_id    TEXT NOT NULL REFERENCES parked_turns (id),
    call_id       TEXT NOT NULL,
    request_state TEXT,
    PRIMARY KEY (request_id, call_id)
);

ALTER TABLE input_requests ADD COLUMN parked_id TEXT;
ALTER TABLE input_requests ADD COLUMN call_id TEXT;
ALTER TABLE input_requests ADD COLUMN input_key TEXT;

CREATE INDEX input_requests_by_parked_call ON input_requests (parked_id, call_id);

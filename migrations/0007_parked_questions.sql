-- A server on the 2026-07-28 revision asks for input in the result of a call, and takes the answer
-- in a retry of that call: such a turn is parked like one waiting for approval, holding nothing.
-- input_waits keeps, per parked call, the server's opaque state to send back with the retry; each of
-- the call's questions is an input_requests row pointing at the parked turn and its call.
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

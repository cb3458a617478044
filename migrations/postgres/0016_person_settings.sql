-- A person's own settings (as migrations/0016_person_settings.sql): their time zone for now; and how a
-- built-in call waiting for a person reads on its card, written once when it is parked.
CREATE TABLE person_settings (
    person     TEXT PRIMARY KEY,
    time_zone  TEXT,
    changed_at DOUBLE PRECISION NOT NULL
);

ALTER TABLE pending_calls ADD COLUMN summary TEXT;

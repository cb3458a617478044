-- A person's own settings, one row each (bot/store/person_settings.py): for now their time zone, an
-- IANA name, in which their schedules' times are read and shown. person: their id as sign-ins,
-- memories and schedules key people. No row: the platform's default (the terminal's local zone).
CREATE TABLE person_settings (
    person     TEXT PRIMARY KEY,
    time_zone  TEXT,
    changed_at REAL NOT NULL
);

-- How a built-in call waiting for a person reads on its card (a schedule to confirm: its prompt,
-- place and next run times), written once when it is parked so every process shows the same card.
ALTER TABLE pending_calls ADD COLUMN summary TEXT CHECK (summary IS NULL OR json_valid(summary));

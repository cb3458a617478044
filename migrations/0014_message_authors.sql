-- Whose each user message is, and which conversations are private, so that a person's data can be
-- found, exported and forgotten (bot/store/person_data.py). Rows written before stay NULL: their
-- author was not recorded.
-- author: the person's id as sign-ins and memories key people (`slack:T1:U1`, `discord:42`);
-- author_user: their platform's own user id, as parked turns, the audit and feedback name people.
ALTER TABLE messages ADD COLUMN author TEXT;
ALTER TABLE messages ADD COLUMN author_user TEXT;

CREATE INDEX messages_by_author ON messages (author) WHERE author IS NOT NULL;

-- private = 1: a DM, or a platform without channels (the terminal), read by its person alone;
-- 0: a channel or a thread others read too.
ALTER TABLE conversations ADD COLUMN private INTEGER CHECK (private IN (0, 1));

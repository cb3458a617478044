-- Whose each user message is, and which conversations are private (as
-- migrations/0014_message_authors.sql). Rows written before stay NULL.
ALTER TABLE messages ADD COLUMN author TEXT;
ALTER TABLE messages ADD COLUMN author_user TEXT;

CREATE INDEX messages_by_author ON messages (author) WHERE author IS NOT NULL;

ALTER TABLE conversations ADD COLUMN private INTEGER CHECK (private IN (0, 1));

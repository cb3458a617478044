-- Where a front end posted a tool's question (platform-specific), so any process can update that
-- message when the question ends, after a restart too.
ALTER TABLE input_requests ADD COLUMN message_ref TEXT;

-- Where a front end posted a tool's question (as migrations/0008_input_message_refs.sql).
ALTER TABLE input_requests ADD COLUMN message_ref TEXT;

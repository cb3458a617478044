-- When a conversation was deleted (as migrations/0011_conversation_deletion.sql).
ALTER TABLE conversations ADD COLUMN deleted_at TEXT;

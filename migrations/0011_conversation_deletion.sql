-- A deleted conversation keeps its row, emptied: its messages and everything else holding message
-- text are gone, and deleted_at says when. The row stays because the approvals audit (who decided
-- which call, where, when; no message text) points at it and outlives the conversation.
ALTER TABLE conversations ADD COLUMN deleted_at TEXT;

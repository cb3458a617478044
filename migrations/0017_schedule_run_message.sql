-- The platform message a scheduled run posted to answer under (a Slack message's ts, a Discord
-- message's id), written as soon as it is posted: a run handed on after its process stopped answers
-- under that same message instead of posting a second one. NULL until then, and where a run posts
-- nothing of its own (a DM, the terminal).
ALTER TABLE schedule_runs ADD COLUMN message TEXT;

-- The platform message a scheduled run posted to answer under (a Slack message's ts, a Discord
-- message's id), written as soon as it is posted: a run handed on after its process stopped answers
-- under that same message instead of posting a second one. NULL until then, and where a run posts
-- nothing of its own (a DM, the terminal).
ALTER TABLE schedule_runs ADD COLUMN message TEXT;

-- How many times the run was handed on (taken over after the process running it stopped): a run
-- that every process taking it stops during is recorded failed after a few, not handed on for ever.
ALTER TABLE schedule_runs ADD COLUMN hand_ons INTEGER NOT NULL DEFAULT 0;

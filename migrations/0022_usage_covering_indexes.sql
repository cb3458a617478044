-- The budget check (bot/store/usage.py) sums a person's, a place's or a workspace's requests over a
-- period inside the write transaction, on the path of each turn's first request. With the figures in
-- the index, those sums read the index alone instead of looking up every row of a busy workspace's
-- month in the table; the indexes of 0019 on (subject, at) are replaced by these.
DROP INDEX model_usage_by_person;
DROP INDEX model_usage_by_place;
DROP INDEX model_usage_by_workspace;
CREATE INDEX model_usage_by_person ON model_usage (person, at, prompt_tokens, completion_tokens, cost)
    WHERE person IS NOT NULL;
CREATE INDEX model_usage_by_place ON model_usage (place, at, prompt_tokens, completion_tokens, cost);
CREATE INDEX model_usage_by_workspace ON model_usage (workspace, at, prompt_tokens, completion_tokens, cost);

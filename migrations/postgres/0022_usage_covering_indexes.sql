-- The budget check's sums read the index alone (as migrations/0022_usage_covering_indexes.sql): the
-- figures ride along in each (subject, at) index, so an index-only scan answers them.
DROP INDEX model_usage_by_person;
DROP INDEX model_usage_by_place;
DROP INDEX model_usage_by_workspace;
CREATE INDEX model_usage_by_person ON model_usage (person, at)
    INCLUDE (prompt_tokens, completion_tokens, cost) WHERE person IS NOT NULL;
CREATE INDEX model_usage_by_place ON model_usage (place, at) INCLUDE (prompt_tokens, completion_tokens, cost);
CREATE INDEX model_usage_by_workspace ON model_usage (workspace, at)
    INCLUDE (prompt_tokens, completion_tokens, cost);

-- The inbox used to keep whole Slack request bodies, the legacy verification `token` included.
-- Keep only what dedupe and replay need (adapters/slack/inbox.py): an answered event needs nothing
-- but its id, an unfinished one the fields `classify` reads. Anything unreadable is emptied; replay
-- drops an empty entry with a warning, as it did an unreadable one.
-- secure_delete: the replaced text is overwritten in the file, not left in its free space.
PRAGMA secure_delete = ON;

UPDATE inbox
SET payload = CASE
    WHEN status <> 'received' THEN '{}'
    WHEN NOT json_valid(payload) THEN '{}'
    WHEN json_type(payload) <> 'object' THEN '{}'
    ELSE json_object(
        'type', json_extract(payload, '$.type'),
        'event_id', json_extract(payload, '$.event_id'),
        'team_id', json_extract(payload, '$.team_id'),
        'event', json_object(
            'type', json_extract(payload, '$.event.type'),
            'subtype', json_extract(payload, '$.event.subtype'),
            'user', json_extract(payload, '$.event.user'),
            'bot_id', json_extract(payload, '$.event.bot_id'),
            'channel', json_extract(payload, '$.event.channel'),
            'channel_type', json_extract(payload, '$.event.channel_type'),
            'ts', json_extract(payload, '$.event.ts'),
            'thread_ts', json_extract(payload, '$.event.thread_ts'),
            'text', json_extract(payload, '$.event.text'),
            'team', json_extract(payload, '$.event.team')
        )
    )
END
WHERE platform = 'slack';

-- The delivery log: the ids and event a search names, kept beside the
-- message so that no search parses stored JSON, and read newest first.
ALTER TABLE deliveries ADD COLUMN user_id TEXT;
ALTER TABLE deliveries ADD COLUMN anonymous_id TEXT;
ALTER TABLE deliveries ADD COLUMN event TEXT;
UPDATE deliveries SET
    user_id = nullif(json_extract(message, '$.userId'), ''),
    anonymous_id = nullif(json_extract(message, '$.anonymousId'), ''),
    event = CASE WHEN kind = 'track' THEN json_extract(message, '$.event') END
WHERE json_valid(message);
-- Every search is ordered by (received_at, id) descending; SQLite's index
-- entries end with the rowid, so each of these is that order within its key.
CREATE INDEX deliveries_received ON deliveries (received_at);
CREATE INDEX deliveries_message ON deliveries (message_id);
CREATE INDEX deliveries_user ON deliveries (user_id, received_at) WHERE user_id IS NOT NULL;
CREATE INDEX deliveries_anonymous ON deliveries (anonymous_id, received_at) WHERE anonymous_id IS NOT NULL;
CREATE INDEX deliveries_event ON deliveries (event, received_at) WHERE event IS NOT NULL;
-- A search by state reads the partial indexes of pending, dead and
-- finished calls the schema has already: one more index of every pending
-- call would cost each call two more index writes (in, then out when it is
-- delivered).
-- A refused call is searched by source and time.
CREATE INDEX rejected_source ON rejected (source, received_at);

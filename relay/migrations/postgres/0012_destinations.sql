-- A source has named destinations, and a call is stored once for each
-- destination it goes to: the row is the call's delivery to that
-- destination, and the deduplication key becomes (source, messageId,
-- destination). Rows stored before are the delivery to the destination
-- `[sources.webhooks]` stands for, named "webhooks". Adding a column with
-- a constant default rewrites nothing (Postgres 11 and later); the new
-- unique index is built once, as the old one is dropped.
ALTER TABLE deliveries ADD COLUMN destination TEXT NOT NULL DEFAULT 'webhooks';
ALTER TABLE deliveries ADD CONSTRAINT deliveries_source_message_destination_key
    UNIQUE (source, message_id, destination);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_source_message_id_key;

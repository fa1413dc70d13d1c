-- The deduplication key starts with the messageId: (message_id, source,
-- destination). It is the index a search by messageId reads, so the
-- separate index of message ids is gone, and with it one of the two
-- places at random (message ids are random) that every stored call wrote
-- to.
ALTER TABLE deliveries ADD CONSTRAINT deliveries_message_source_destination_key
    UNIQUE (message_id, source, destination);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_source_message_destination_key;
DROP INDEX deliveries_message;
-- The claim tokens' index (lease renewals) held every pending row, its
-- NULL token included, so each stored call wrote an entry to it: only
-- claimed rows now.
DROP INDEX deliveries_claim;
CREATE INDEX deliveries_claim ON deliveries (claim) WHERE status = 0 AND claim IS NOT NULL;

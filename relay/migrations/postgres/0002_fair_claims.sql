-- Claims are made per source (one source's backlog cannot hold back
-- another's), oldest due first within it.
CREATE INDEX deliveries_source_due ON deliveries (source, due_at) WHERE status = 0;
-- The next wake-up (the earliest due call, or the earliest lease to end)
-- is read through indexes, not a scan of every pending call.
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE status = 0 AND lease_until IS NOT NULL;
-- Retention covers every finished kind: delivered, dead, undeliverable.
DROP INDEX deliveries_finished;
CREATE INDEX deliveries_finished ON deliveries (status, finished_at) WHERE status <> 0;
-- Calls stored with no destination had no finish time; retention counts
-- from their receipt.
UPDATE deliveries SET finished_at = received_at WHERE status = 3 AND finished_at IS NULL;

-- Claims are made per source (one source's backlog cannot hold back
-- another's), oldest due first within it.
CREATE INDEX deliveries_source_due ON deliveries (source, due_at) WHERE status = 0;
-- Retention covers every finished kind: delivered, dead, undeliverable.
DROP INDEX deliveries_finished;
CREATE INDEX deliveries_finished ON deliveries (status, finished_at) WHERE status <> 0;

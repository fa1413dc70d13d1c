-- The deduplication key starts with the messageId: (message_id, source,
-- destination). It is the index a search by messageId reads, so the
-- separate index of message ids is gone, and with it one of the two
-- places at random (message ids are random) that every stored call wrote
-- to: each such index costs a stored call one page of the write-ahead log.
--
-- SQLite cannot change a table's UNIQUE constraint in place: the table is
-- made again with every row copied once (ids kept), and its indexes with
-- it. On a large database this migration takes about as long as copying
-- the file.
CREATE TABLE deliveries_13 (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    destination TEXT NOT NULL DEFAULT 'webhooks',
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    status INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    lease_until INTEGER,
    claim INTEGER,
    state TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    finished_at INTEGER,
    user_id TEXT,
    anonymous_id TEXT,
    event TEXT,
    trace_parent TEXT,
    batch TEXT,
    UNIQUE (message_id, source, destination)
);
INSERT INTO deliveries_13 (id, source, message_id, destination, kind, message, received_at,
    status, due_at, lease_until, claim, state, attempts, outcome, finished_at, user_id,
    anonymous_id, event, trace_parent, batch)
SELECT id, source, message_id, destination, kind, message, received_at, status, due_at,
    lease_until, claim, state, attempts, outcome, finished_at, user_id, anonymous_id, event,
    trace_parent, batch
FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_13 RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE status = 0;
CREATE INDEX deliveries_dead ON deliveries (received_at) WHERE status = 2;
CREATE INDEX deliveries_source_due ON deliveries (source, due_at) WHERE status = 0;
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE status = 0 AND lease_until IS NOT NULL;
CREATE INDEX deliveries_finished ON deliveries (status, finished_at) WHERE status <> 0;
CREATE INDEX deliveries_received ON deliveries (received_at);
CREATE INDEX deliveries_user ON deliveries (user_id, received_at) WHERE user_id IS NOT NULL;
CREATE INDEX deliveries_anonymous ON deliveries (anonymous_id, received_at) WHERE anonymous_id IS NOT NULL;
CREATE INDEX deliveries_event ON deliveries (event, received_at) WHERE event IS NOT NULL;
CREATE INDEX deliveries_batch ON deliveries (batch, id) WHERE batch IS NOT NULL;

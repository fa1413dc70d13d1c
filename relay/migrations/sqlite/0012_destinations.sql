-- A source has named destinations, and a call is stored once for each
-- destination it goes to: the row is the call's delivery to that
-- destination, and the deduplication key becomes (source, messageId,
-- destination). Rows stored before are the delivery to the destination
-- `[sources.webhooks]` stands for, named "webhooks".
--
-- SQLite cannot change a table's UNIQUE constraint in place: the table is
-- made again with every row copied once (ids kept), and its indexes with
-- it. On a large database this migration takes about as long as copying
-- the file.
CREATE TABLE deliveries_12 (
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
    UNIQUE (source, message_id, destination)
);
INSERT INTO deliveries_12 (id, source, message_id, kind, message, received_at, status, due_at,
    lease_until, claim, state, attempts, outcome, finished_at, user_id, anonymous_id, event,
    trace_parent, batch)
SELECT id, source, message_id, kind, message, received_at, status, due_at, lease_until, claim,
    state, attempts, outcome, finished_at, user_id, anonymous_id, event, trace_parent, batch
FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_12 RENAME TO deliveries;
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE status = 0;
CREATE INDEX deliveries_dead ON deliveries (received_at) WHERE status = 2;
CREATE INDEX deliveries_source_due ON deliveries (source, due_at) WHERE status = 0;
CREATE INDEX deliveries_leased ON deliveries (lease_until) WHERE status = 0 AND lease_until IS NOT NULL;
CREATE INDEX deliveries_finished ON deliveries (status, finished_at) WHERE status <> 0;
CREATE INDEX deliveries_received ON deliveries (received_at);
CREATE INDEX deliveries_message ON deliveries (message_id);
CREATE INDEX deliveries_user ON deliveries (user_id, received_at) WHERE user_id IS NOT NULL;
CREATE INDEX deliveries_anonymous ON deliveries (anonymous_id, received_at) WHERE anonymous_id IS NOT NULL;
CREATE INDEX deliveries_event ON deliveries (event, received_at) WHERE event IS NOT NULL;
CREATE INDEX deliveries_batch ON deliveries (batch, id) WHERE batch IS NOT NULL;

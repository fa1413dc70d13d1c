-- The schema the relay has had from the start. Times are milliseconds
-- since the epoch; status: 0 pending, 1 delivered, 2 dead, 3 undeliverable.
CREATE TABLE deliveries (
    id BIGSERIAL PRIMARY KEY,
    source TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    status SMALLINT NOT NULL,
    due_at BIGINT NOT NULL,
    lease_until BIGINT,
    claim BIGINT,
    state TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    finished_at BIGINT,
    UNIQUE (source, message_id)
);
CREATE INDEX deliveries_due ON deliveries (due_at) WHERE status = 0;
CREATE INDEX deliveries_claim ON deliveries (claim) WHERE status = 0;
CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status IN (1, 3);
CREATE INDEX deliveries_dead ON deliveries (received_at) WHERE status = 2;
CREATE TABLE rejected (
    id BIGSERIAL PRIMARY KEY,
    source TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    code TEXT NOT NULL,
    reason TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX rejected_received ON rejected (received_at);
CREATE TABLE audiences (
    source TEXT NOT NULL,
    audience TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (source, audience)
);

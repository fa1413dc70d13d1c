-- The relays delivering from this database, each heard from every few
-- seconds: they share every endpoint's rate limit and cap among those
-- heard from lately.
CREATE TABLE senders (
    relay TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);

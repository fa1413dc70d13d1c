-- What an endpoint URL's guard holds back (a Retry-After pause, an open
-- circuit), shared by the relays on this database and kept across
-- restarts: ms since the epoch, 0 for none.
CREATE TABLE endpoint_holds (
    url TEXT PRIMARY KEY,
    paused_until BIGINT NOT NULL DEFAULT 0,
    open_until BIGINT NOT NULL DEFAULT 0,
    open_ms BIGINT NOT NULL DEFAULT 0
);

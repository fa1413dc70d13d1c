-- What an endpoint URL's guard holds back (a Retry-After pause, an open
-- circuit), kept across restarts: ms since the epoch, 0 for none.
CREATE TABLE endpoint_holds (
    url TEXT PRIMARY KEY,
    paused_until INTEGER NOT NULL DEFAULT 0,
    open_until INTEGER NOT NULL DEFAULT 0,
    open_ms INTEGER NOT NULL DEFAULT 0
);

-- Endpoint URLs disabled for failing too long, until an operator enables
-- them: kept across restarts and shared by the relays on this database.
CREATE TABLE disabled_endpoints (
    url TEXT PRIMARY KEY,
    since BIGINT NOT NULL
);

-- Endpoint URLs disabled for failing too long, until an operator enables
-- them: kept across restarts.
CREATE TABLE disabled_endpoints (
    url TEXT PRIMARY KEY,
    since INTEGER NOT NULL
);

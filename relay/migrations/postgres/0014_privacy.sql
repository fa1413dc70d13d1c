-- A user's data erased and their calls no longer taken. The user id is
-- kept only as a keyed hash (HMAC-SHA256 under the relay's secret key), so
-- whoever reads the database without the key cannot tell whose it is.
-- Audit of each deletion: who erased how much, when (user_hash is NULL
-- when the relay had no key).
CREATE TABLE deletions (
    id BIGSERIAL PRIMARY KEY,
    user_hash TEXT,
    at BIGINT NOT NULL,
    operator TEXT NOT NULL,
    calls BIGINT NOT NULL,
    rejected BIGINT NOT NULL,
    suppressed SMALLINT NOT NULL
);
-- Users whose calls are acknowledged and never stored or delivered.
CREATE TABLE suppressions (
    user_hash TEXT PRIMARY KEY,
    since BIGINT NOT NULL,
    operator TEXT NOT NULL
);

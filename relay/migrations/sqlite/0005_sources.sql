-- Sources kept in the database (admin API, `callpost-relay apply`), each
-- sealed whole under CALLPOST_RELAY_SECRET_KEY: only the name is readable.
CREATE TABLE sources (
    name TEXT PRIMARY KEY,
    sealed TEXT NOT NULL
);

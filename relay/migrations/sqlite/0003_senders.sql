-- Nothing on SQLite. On Postgres this migration makes the table of the
-- relays delivering from the database, which share the endpoints' limits;
-- one relay holds a SQLite file (its lock refuses a second), so it shares
-- with no one. Kept so that each migration has the same number and name on
-- both databases (a database an older relay numbered without it is
-- renumbered once at open: see `store::sqlite::migrate`).
SELECT 1;

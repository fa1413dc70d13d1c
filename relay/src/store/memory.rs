//! A store in memory, for tests of the parts above storage: the same
//! contract as SQLite and Postgres, no durability.

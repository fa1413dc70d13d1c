//! The relay's integration tests, in one binary: the relay and its
//! dependencies are linked once for all of them.
//!
//! * `store_contract`: what every store keeps, run over SQLite
//!   (`store_sqlite`), Postgres (`store_postgres`, on the throwaway server
//!   `scripts/postgres.sh` starts) and the memory store (`deliver`), and
//!   over two groups of each database (`store_sharded` has what only
//!   groups have), and over a sealed SQLite store (`store_sealed` has what
//!   only sealing has);
//! * `api`: the listeners, the Tracking API and the admin API over the
//!   composition root;
//! * `deliver`: the delivery workers against real receivers on 127.0.0.1
//!   (`receiver`);
//! * `process`: the built binary as its own process;
//! * `layers`: the relay's modules form layers.
//!
//! The end-to-end tests with real SDKs, browsers, kills and several relays
//! are Python, in `tests/e2e/`.

// Test code: a panic is how it reports.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr,
    unreachable_pub
)]

#[macro_use]
mod store_contract;

mod api;
mod deliver;
mod layers;
mod process;
mod receiver;
mod store_postgres;
mod store_sealed;
mod store_sharded;
mod store_sqlite;

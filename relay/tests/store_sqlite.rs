//! The SQLite store: the store contract, then what only SQLite has (the
//! file's mode and lock, migrations from older relays, the writer's time
//! limit and group commit).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "store_contract/mod.rs"]
#[macro_use]
mod contract;

use callpost_relay::store::sqlite::SqliteStore;
use callpost_relay::store::{Store, StoreOptions, Synchronous};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

fn options() -> StoreOptions {
    StoreOptions {
        synchronous: Synchronous::Full,
        timeout: Duration::from_secs(10),
        exclusive: true,
    }
}

/// A store on a new file in a directory of its own, removed when the guard
/// drops.
async fn fresh() -> (Arc<dyn Store>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("relay.db"), options())
        .await
        .unwrap();
    (Arc::new(store), dir)
}

contract_tests!(fresh);

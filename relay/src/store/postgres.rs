//! The store for several relays on one Postgres database.

use super::*;

/// Several relays, one outbox.
pub struct PostgresStore {}

impl PostgresStore {
    /// Connects, and runs the migrations under an advisory lock.
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        let _ = (url, options);
        Err(StoreError::Refused("not built yet".into()))
    }
}

// A placeholder until the store is written: every call fails.
#[async_trait]
impl Store for PostgresStore {
    fn migrated(&self) -> (i64, i64) {
        (0, 0)
    }
    fn backlog(&self) -> usize {
        0
    }
    fn healthy(&self) -> bool {
        false
    }
    async fn insert(&self, _: Vec<Row>, _: Vec<RejectedRow>) -> Result<usize, StoreError> {
        Err(StoreError::Closed)
    }
    async fn claim(&self, _: i64, _: &str, _: usize, _: i64) -> Result<Vec<Claimed>, StoreError> {
        Err(StoreError::Closed)
    }
    async fn finish(&self, _: Vec<Finish>, _: i64) -> Result<usize, StoreError> {
        Err(StoreError::Closed)
    }
    async fn renew(&self, _: Vec<i64>, _: i64) -> Result<(), StoreError> {
        Err(StoreError::Closed)
    }
    async fn next_due(&self, _: i64) -> Result<Option<i64>, StoreError> {
        Err(StoreError::Closed)
    }
    async fn park_unrouted(&self, _: i64, _: Vec<String>) -> Result<u64, StoreError> {
        Err(StoreError::Closed)
    }
    async fn purge(&self, _: i64, _: Retention) -> Result<Purged, StoreError> {
        Err(StoreError::Closed)
    }
    async fn replay(&self, _: i64, _: ReplayFilter) -> Result<u64, StoreError> {
        Err(StoreError::Closed)
    }
    async fn stats(&self, _: i64) -> Result<Stats, StoreError> {
        Err(StoreError::Closed)
    }
    async fn dead_letters(&self, _: usize) -> Result<Vec<DeadLetter>, StoreError> {
        Err(StoreError::Closed)
    }
    async fn rejected(&self, _: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        Err(StoreError::Closed)
    }
    async fn audience_state(&self, _: &str, _: &str) -> Result<Option<String>, StoreError> {
        Err(StoreError::Closed)
    }
    async fn audience_sync(&self, _: &str, _: &str, _: String, _: Vec<Row>, _: i64) -> Result<usize, StoreError> {
        Err(StoreError::Closed)
    }
    fn statements(&self) -> u64 {
        0
    }
    fn set_commit_observer(&self, _: CommitObserver) {}
    async fn close(&self) {}
}

//! A store in memory, for tests of the parts above storage: the same
//! contract as SQLite and Postgres, no durability.
//!
//! Tests can also make it fail ([`MemoryStore::set_failure`]) or hang
//! ([`MemoryStore::set_stalled`]) as a broken or stuck database would, and
//! read every row as stored ([`MemoryStore::rows`]).

use super::sql;
use super::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tokio::sync::watch;

/// How long a call waits on a stalled store before it reports
/// [`StoreError::Timeout`], unless [`MemoryStore::with_timeout`] says
/// otherwise: the relay's default database timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(crate::config::DEFAULT_DATABASE_TIMEOUT_MS);

/// A delivery row as the store holds it (what a test may inspect).
#[derive(Clone)]
pub struct StoredRow {
    /// The row's id.
    pub id: i64,
    /// The source's name.
    pub source: String,
    /// `messageId`.
    pub message_id: String,
    /// The destination it goes to.
    pub destination: String,
    /// The call's type.
    pub kind: &'static str,
    /// The stored message.
    pub message: String,
    /// When it was received, ms.
    pub received_at: i64,
    /// Its status.
    pub status: Status,
    /// When it is due, ms.
    pub due_at: i64,
    /// Leased until, ms.
    pub lease_until: Option<i64>,
    /// The token of the claim that holds it.
    pub claim: Option<i64>,
    /// The core's saved delivery state.
    pub state: Option<String>,
    /// Attempts made.
    pub attempts: i64,
    /// The outcome record (dead letters, undeliverable rows).
    pub outcome: Option<String>,
    /// When it finished, ms.
    pub finished_at: Option<i64>,
    /// `userId`.
    pub user_id: Option<String>,
    /// `anonymousId`.
    pub anonymous_id: Option<String>,
    /// A track call's `event`.
    pub event: Option<String>,
    /// The ingest span's `traceparent` (tracing on).
    pub trace_parent: Option<String>,
    /// The batch it waits or went in, if any.
    pub batch: Option<String>,
}

/// Customer data: the id only.
impl fmt::Debug for StoredRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredRow")
            .field("id", &self.id)
            .field("source", &self.source)
            .field("message_id", &self.message_id)
            .field("destination", &self.destination)
            .field("status", &self.status)
            .field("due_at", &self.due_at)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl StoredRow {
    /// Pending, and held by a lease that has not ended at `now`.
    fn leased(&self, now: i64) -> bool {
        self.lease_until.is_some_and(|t| t > now)
    }

    fn unlease(&mut self) {
        self.lease_until = None;
        self.claim = None;
    }

    fn entry(&self) -> LogEntry {
        LogEntry {
            source: self.source.clone(),
            destination: self.destination.clone(),
            message_id: self.message_id.clone(),
            kind: self.kind.to_owned(),
            event: self.event.clone(),
            user_id: self.user_id.clone(),
            anonymous_id: self.anonymous_id.clone(),
            received_at: self.received_at,
            status: self.status.name(),
            attempts: self.attempts,
            finished_at: self.finished_at,
            id: self.id,
            message: None,
        }
    }
}

/// Whether a replay's filter names `r` (its state aside).
fn replayed(filter: &ReplayFilter, r: &StoredRow) -> bool {
    let calls = LogFilter {
        status: None,
        ..filter.calls.clone()
    };
    calls.matches(&r.entry())
}

/// Newest first, after `after`.
fn newest_first<T>(
    mut rows: Vec<T>,
    after: Option<Cursor>,
    limit: usize,
    at: impl Fn(&T) -> Cursor,
) -> Page<T> {
    rows.retain(|r| {
        after.is_none_or(|c| {
            let k = at(r);
            (k.received_at, k.id) < (c.received_at, c.id)
        })
    });
    rows.sort_by_key(|r| {
        let k = at(r);
        std::cmp::Reverse((k.received_at, k.id))
    });
    rows.truncate(limit.saturating_add(1));
    Page::of(rows, limit, at)
}

#[derive(Default)]
struct Inner {
    rows: BTreeMap<i64, StoredRow>,
    keys: HashMap<(String, String, String), i64>,
    /// (id, call), oldest first.
    rejected: Vec<(u64, RejectedRow)>,
    audiences: HashMap<(String, String), String>,
    /// relay → when it was last heard from.
    senders: HashMap<String, i64>,
    /// Disabled endpoint URLs.
    disabled: BTreeMap<String, i64>,
    sources: BTreeMap<String, String>,
    sources_version: i64,
    holds: BTreeMap<String, Hold>,
    settings: HashMap<String, String>,
    deletions: Vec<Deletion>,
    /// user hash → (since, operator).
    suppressions: BTreeMap<String, (i64, String)>,
    next_id: i64,
    next_rejected: u64,
    next_claim: i64,
}

impl Inner {
    fn insert_rows(&mut self, rows: Vec<Row>, trace_parent: Option<&str>) -> usize {
        let mut new = 0;
        for r in rows {
            let key = (
                r.source.clone(),
                r.message_id.clone(),
                r.destination.clone(),
            );
            if self.keys.contains_key(&key) {
                continue;
            }
            let first = r.first;
            self.next_id += 1;
            let id = self.next_id;
            self.keys.insert(key, id);
            // A call stored undeliverable finished when it was received
            // (retention counts from then).
            let finished_at = (r.status != Status::Pending).then_some(r.received_at);
            self.rows.insert(
                id,
                StoredRow {
                    id,
                    source: r.source,
                    message_id: r.message_id,
                    destination: r.destination,
                    kind: r.kind,
                    message: r.message,
                    received_at: r.received_at,
                    status: r.status,
                    due_at: r.received_at,
                    lease_until: None,
                    claim: None,
                    state: None,
                    attempts: 0,
                    outcome: None,
                    finished_at,
                    user_id: r.user_id,
                    anonymous_id: r.anonymous_id,
                    event: r.event,
                    trace_parent: trace_parent.map(str::to_owned),
                    batch: None,
                },
            );
            new += usize::from(first);
        }
        new
    }

    fn remove(&mut self, id: i64) {
        if let Some(r) = self.rows.remove(&id) {
            self.keys.remove(&(r.source, r.message_id, r.destination));
        }
    }
}

/// The store in memory.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    failure: Mutex<Option<StoreError>>,
    stalled: watch::Sender<bool>,
    unhealthy: AtomicBool,
    closed: AtomicBool,
    statements: AtomicU64,
    observer: Mutex<Option<CommitObserver>>,
    timeout: Duration,
}

/// Customer data stays out of it.
impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("rows", &lock(&self.inner).rows.len())
            .finish_non_exhaustive()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::with_timeout(DEFAULT_TIMEOUT)
    }

    /// An empty store whose calls give up after `timeout` while it is
    /// stalled.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            failure: Mutex::new(None),
            stalled: watch::Sender::new(false),
            unhealthy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            statements: AtomicU64::new(0),
            observer: Mutex::new(None),
            timeout,
        }
    }

    /// While `Some`, every call fails with this error and the store is not
    /// healthy (a database that refuses work); `None` brings it back.
    pub fn set_failure(&self, error: Option<StoreError>) {
        *lock(&self.failure) = error;
    }

    /// While true, every call waits, and gives up with
    /// [`StoreError::Timeout`] after the store's timeout (a database that
    /// stopped answering); false lets the waiting calls through.
    pub fn set_stalled(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }

    /// Every delivery row as stored, by id.
    pub fn rows(&self) -> Vec<StoredRow> {
        lock(&self.inner).rows.values().cloned().collect()
    }

    /// Runs before every call: refuses when closed or failing, waits while
    /// stalled, and counts one statement.
    async fn enter(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        let mut stalled = self.stalled.subscribe();
        if *stalled.borrow_and_update() {
            let waited = tokio::time::timeout(self.timeout, stalled.wait_for(|s| !*s)).await;
            if !matches!(waited, Ok(Ok(_))) {
                self.unhealthy.store(true, Ordering::Release);
                return Err(StoreError::Timeout);
            }
        }
        if let Some(e) = lock(&self.failure).clone() {
            self.unhealthy.store(true, Ordering::Release);
            return Err(e);
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        self.unhealthy.store(false, Ordering::Release);
        self.statements.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn committed(&self, took: Duration, calls: usize) {
        let observer = lock(&self.observer).clone();
        if let Some(o) = observer {
            o(took, calls);
        }
    }
}

/// The data stays consistent whatever a panicking holder left half done
/// (every change is made under one lock call), so a poisoned lock is used
/// as it is.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl Store for MemoryStore {
    fn migrated(&self) -> (i64, i64) {
        (0, 0)
    }

    fn backlog(&self) -> usize {
        0
    }

    fn healthy(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
            && !self.unhealthy.load(Ordering::Acquire)
            && lock(&self.failure).is_none()
    }

    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
    ) -> Result<usize, StoreError> {
        self.insert_traced(rows, rejected, None).await
    }

    async fn insert_traced(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        self.enter().await?;
        let started = Instant::now();
        let calls = rows.len() + rejected.len();
        let new = {
            let mut inner = lock(&self.inner);
            let new = inner.insert_rows(rows, trace_parent.as_deref());
            for r in rejected {
                inner.next_rejected += 1;
                let id = inner.next_rejected;
                inner.rejected.push((id, r));
            }
            new
        };
        self.committed(started.elapsed(), calls);
        Ok(new)
    }

    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let mut due: Vec<(i64, i64)> = inner
            .rows
            .values()
            .filter(|r| {
                r.status == Status::Pending
                    && r.source == source
                    && r.due_at <= now
                    && !r.leased(now)
            })
            .map(|r| (r.due_at, r.id))
            .collect();
        due.sort_unstable();
        due.truncate(limit);
        if due.is_empty() {
            return Ok(Vec::new());
        }
        inner.next_claim += 1;
        let token = inner.next_claim;
        let mut out = Vec::with_capacity(due.len());
        for (_, id) in due {
            if let Some(r) = inner.rows.get_mut(&id) {
                r.lease_until = Some(now.saturating_add(lease_ms));
                r.claim = Some(token);
                out.push(Claimed {
                    id,
                    claim: token,
                    source: r.source.clone(),
                    destination: r.destination.clone(),
                    message_id: r.message_id.clone(),
                    message: r.message.clone(),
                    state: r.state.clone(),
                    attempts: r.attempts,
                    trace_parent: r.trace_parent.clone(),
                    batch: r.batch.clone(),
                    kind: r.kind.to_owned(),
                });
            }
        }
        Ok(out)
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let mut refused = 0;
        for item in items {
            let (id, claim) = match &item {
                Finish::Delivered { id, claim, .. }
                | Finish::Retry { id, claim, .. }
                | Finish::Dead { id, claim, .. }
                | Finish::Undeliverable { id, claim, .. }
                | Finish::Filtered { id, claim, .. }
                | Finish::Forget { id, claim }
                | Finish::Release { id, claim } => (*id, *claim),
            };
            if let Finish::Forget { .. } = item {
                let held = inner
                    .rows
                    .get(&id)
                    .is_some_and(|r| r.status == Status::Pending && r.claim == Some(claim));
                match held.then(|| inner.rows.remove(&id)).flatten() {
                    Some(r) => {
                        inner.keys.remove(&(r.source, r.message_id, r.destination));
                    }
                    None => refused += 1,
                }
                continue;
            }
            let Some(r) = inner
                .rows
                .get_mut(&id)
                .filter(|r| r.status == Status::Pending && r.claim == Some(claim))
            else {
                refused += 1;
                continue;
            };
            r.unlease();
            match item {
                Finish::Delivered {
                    attempts,
                    outcome,
                    batch,
                    ..
                } => {
                    r.status = Status::Delivered;
                    r.finished_at = Some(now);
                    r.attempts = attempts;
                    r.state = None;
                    r.outcome = outcome;
                    r.batch = batch;
                }
                Finish::Retry {
                    attempts,
                    state,
                    due_at,
                    batch,
                    ..
                } => {
                    r.state = state;
                    r.due_at = due_at;
                    r.attempts = attempts;
                    r.batch = batch;
                }
                Finish::Dead {
                    attempts,
                    state,
                    outcome,
                    batch,
                    ..
                } => {
                    r.status = Status::Dead;
                    r.state = state;
                    r.outcome = Some(outcome);
                    r.finished_at = Some(now);
                    r.attempts = attempts;
                    r.batch = batch;
                }
                Finish::Undeliverable { outcome, .. } => {
                    r.status = Status::Undeliverable;
                    r.outcome = Some(outcome);
                    r.finished_at = Some(now);
                }
                Finish::Filtered { outcome, .. } => {
                    r.status = Status::Filtered;
                    r.state = None;
                    r.outcome = Some(outcome);
                    r.finished_at = Some(now);
                }
                // Forget is taken before (it removes the row).
                Finish::Release { .. } | Finish::Forget { .. } => {}
            }
        }
        Ok(refused)
    }

    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        self.enter().await?;
        let tokens: HashSet<i64> = tokens.into_iter().collect();
        let mut inner = lock(&self.inner);
        for r in inner.rows.values_mut() {
            if r.status == Status::Pending && r.claim.is_some_and(|c| tokens.contains(&c)) {
                r.lease_until = Some(until);
            }
        }
        Ok(())
    }

    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(inner
            .rows
            .values()
            .filter(|r| r.status == Status::Pending)
            .map(|r| match r.lease_until {
                Some(t) if t > now => t,
                _ => r.due_at,
            })
            .min())
    }

    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        self.enter().await?;
        let routed: HashSet<String> = routed.into_iter().collect();
        let mut inner = lock(&self.inner);
        let mut n = 0;
        for r in inner.rows.values_mut() {
            let key = routed_key(&r.source, &r.destination);
            if r.status == Status::Pending && !routed.contains(&key) && !r.leased(now) {
                r.status = Status::Undeliverable;
                r.unlease();
                r.finished_at = Some(now);
                r.outcome = Some(r#"{"kind":"undeliverable","reason":"no_destination"}"#.into());
                n += 1;
            }
        }
        Ok(n)
    }

    async fn purge_sources(
        &self,
        now: i64,
        default: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let mut purged = Purged::default();
        let of = |source: &str| {
            sources
                .iter()
                .find(|(s, _)| s == source)
                .map_or(default, |(_, r)| *r)
        };
        let old: Vec<(i64, Status)> = inner
            .rows
            .values()
            .filter_map(|r| {
                let retention = of(&r.source);
                let keep_ms = match r.status {
                    Status::Pending => return None,
                    Status::Delivered | Status::Filtered => retention.delivered_ms,
                    Status::Dead => retention.dead_ms,
                    Status::Undeliverable => retention.undeliverable_ms,
                };
                let finished = r.finished_at.unwrap_or(r.received_at);
                (finished < now.saturating_sub(keep_ms)).then_some((r.id, r.status))
            })
            .collect();
        for (id, status) in old {
            inner.remove(id);
            match status {
                Status::Delivered => purged.delivered += 1,
                Status::Dead => purged.dead += 1,
                Status::Undeliverable => purged.undeliverable += 1,
                Status::Filtered => purged.filtered += 1,
                Status::Pending => {}
            }
        }
        let n = inner.rejected.len();
        inner
            .rejected
            .retain(|(_, r)| r.received_at >= now.saturating_sub(of(&r.source).rejected_ms));
        purged.rejected = (n - inner.rejected.len()) as u64;
        Ok(purged)
    }

    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.enter().await?;
        let statuses = filter.statuses();
        let mut inner = lock(&self.inner);
        let mut n = 0;
        for r in inner.rows.values_mut() {
            if statuses.contains(&r.status) && replayed(&filter, r) {
                r.status = Status::Pending;
                r.due_at = now;
                r.state = None;
                r.outcome = None;
                r.batch = None;
                r.attempts = 0;
                r.finished_at = None;
                r.unlease();
                n += 1;
            }
        }
        Ok(n)
    }

    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.enter().await?;
        let statuses = filter.statuses();
        let inner = lock(&self.inner);
        Ok(inner
            .rows
            .values()
            .filter(|r| statuses.contains(&r.status) && replayed(&filter, r))
            .count() as u64)
    }

    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        let rows = inner
            .rows
            .values()
            .filter_map(|r| {
                let mut e = r.entry();
                filter.matches(&e).then(|| {
                    if filter.with_message {
                        e.message = Some(r.message.clone());
                    }
                    e
                })
            })
            .collect();
        Ok(newest_first(rows, after, limit, LogEntry::cursor))
    }

    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        let rows = inner
            .rejected
            .iter()
            .filter(|(_, r)| {
                filter.source.as_ref().is_none_or(|s| *s == r.source)
                    && filter.since.is_none_or(|t| r.received_at >= t)
                    && filter.until.is_none_or(|t| r.received_at < t)
            })
            .map(|(id, r)| RejectedEntry {
                source: r.source.clone(),
                received_at: r.received_at,
                status: "rejected",
                code: r.code.to_owned(),
                reason: r.reason.clone(),
                id: i64::try_from(*id).unwrap_or(i64::MAX),
            })
            .collect();
        Ok(newest_first(rows, after, limit, RejectedEntry::cursor))
    }

    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(inner
            .rows
            .values()
            .find(|r| {
                r.source == source
                    && r.message_id == message_id
                    && destination.as_ref().is_none_or(|d| *d == r.destination)
            })
            .map(|r| {
                let mut call = LoggedCall {
                    entry: r.entry(),
                    message: r.message.clone(),
                    state: r.state.clone(),
                    outcome: r.outcome.clone(),
                    batch: r.batch.clone(),
                    batch_log: None,
                };
                if sql::needs_batch_log(&call) {
                    call.batch_log = inner
                        .rows
                        .values()
                        .find(|l| l.source == source && l.batch == call.batch)
                        .and_then(|l| l.state.clone().or_else(|| l.outcome.clone()));
                }
                call
            }))
    }

    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        let mut s = Stats::default();
        for r in inner.rows.values() {
            match r.status {
                Status::Pending => {
                    s.pending += 1;
                    if r.leased(now) {
                        s.in_flight += 1;
                    }
                    s.oldest_pending_received_at = Some(
                        s.oldest_pending_received_at
                            .map_or(r.received_at, |t| t.min(r.received_at)),
                    );
                    s.next_due_at = Some(s.next_due_at.map_or(r.due_at, |t| t.min(r.due_at)));
                }
                Status::Delivered => s.delivered += 1,
                Status::Dead => s.dead += 1,
                Status::Undeliverable => s.undeliverable += 1,
                Status::Filtered => s.filtered += 1,
            }
        }
        s.rejected = inner.rejected.len() as i64;
        Ok(s)
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        let mut dead: Vec<&StoredRow> = inner
            .rows
            .values()
            .filter(|r| r.status == Status::Dead)
            .collect();
        dead.sort_by_key(|r| (r.received_at, r.id));
        Ok(dead
            .into_iter()
            .take(limit)
            .map(|r| DeadLetter {
                source: r.source.clone(),
                destination: r.destination.clone(),
                message_id: r.message_id.clone(),
                kind: r.kind.to_owned(),
                received_at: r.received_at,
                finished_at: r.finished_at,
                attempts: r.attempts,
                outcome: r.outcome.clone(),
            })
            .collect())
    }

    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(inner
            .rejected
            .iter()
            .rev()
            .take(limit)
            .map(|(_, r)| RejectedRecord {
                source: r.source.clone(),
                received_at: r.received_at,
                code: r.code.to_owned(),
                reason: r.reason.clone(),
                text: r.text.clone(),
            })
            .collect())
    }

    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(inner
            .audiences
            .get(&(source.to_owned(), audience.to_owned()))
            .cloned())
    }

    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        rows: Vec<Row>,
        _now: i64,
    ) -> Result<usize, StoreError> {
        self.enter().await?;
        let started = Instant::now();
        let calls = rows.len();
        let new = {
            let mut inner = lock(&self.inner);
            let key = (source.to_owned(), audience.to_owned());
            if inner.audiences.get(&key) != read.as_ref() {
                return Err(StoreError::Conflict(AUDIENCE_CHANGED.into()));
            }
            inner.audiences.insert(key, state);
            inner.insert_rows(rows, None)
        };
        self.committed(started.elapsed(), calls);
        Ok(new)
    }

    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        inner.senders.insert(relay.to_owned(), now);
        inner.senders.retain(|_, seen| *seen >= expired);
        Ok(u32::try_from(inner.senders.len()).unwrap_or(u32::MAX))
    }

    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.enter().await?;
        let live = |h: &Hold| {
            let (paused, open, _) = hold_columns(h);
            paused > now || open > now
        };
        Ok(lock(&self.inner)
            .holds
            .iter()
            .filter(|(_, h)| live(h))
            .map(|(k, h)| (k.clone(), *h))
            .collect())
    }

    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let merged = hold.merge(inner.holds.get(url));
        inner.holds.insert(url.to_owned(), merged);
        Ok(())
    }

    async fn stored_sources(&self) -> Result<StoredSources, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(StoredSources {
            rows: inner
                .sources
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            version: inner.sources_version,
        })
    }

    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        if inner.sources_version != version {
            return Err(StoreError::Conflict(SOURCES_CHANGED.into()));
        }
        inner.sources_version += 1;
        for name in remove {
            inner.sources.remove(&name);
        }
        inner.sources.extend(put);
        Ok(())
    }

    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.enter().await?;
        Ok(lock(&self.inner).disabled.keys().cloned().collect())
    }

    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        if disabled {
            inner.disabled.entry(url.to_owned()).or_insert(now);
        } else {
            inner.disabled.remove(url);
        }
        Ok(())
    }

    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let gone: Vec<i64> = inner
            .rows
            .values()
            .filter(|r| r.user_id.as_deref() == Some(id) || r.anonymous_id.as_deref() == Some(id))
            .map(|r| r.id)
            .collect();
        for row_id in &gone {
            if let Some(r) = inner.rows.remove(row_id) {
                inner.keys.remove(&(r.source, r.message_id, r.destination));
            }
        }
        let needle = serde_json::to_string(id).unwrap_or_default();
        let before = inner.rejected.len();
        inner.rejected.retain(|(_, r)| !r.text.contains(&needle));
        Ok(Erased {
            calls: gone.len() as u64,
            rejected: (before - inner.rejected.len()) as u64,
        })
    }

    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        Ok(match table {
            SealTable::Calls => inner
                .rows
                .range(after.saturating_add(1)..)
                .take(limit)
                .map(|(_, r)| SealRow {
                    id: r.id,
                    texts: [Some(r.message.clone()), r.state.clone(), r.outcome.clone()],
                    keys: [r.user_id.clone(), r.anonymous_id.clone(), r.event.clone()],
                })
                .collect(),
            SealTable::Rejected => inner
                .rejected
                .iter()
                .filter(|(id, _)| i64::try_from(*id).is_ok_and(|id| id > after))
                .take(limit)
                .map(|(id, r)| SealRow {
                    id: i64::try_from(*id).unwrap_or(i64::MAX),
                    texts: [Some(r.text.clone()), None, None],
                    keys: [None, None, None],
                })
                .collect(),
        })
    }

    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let mut n = 0;
        for w in rows {
            let [m, st, o] = w.texts;
            match table {
                SealTable::Calls => {
                    let Some(r) = inner.rows.get_mut(&w.id) else {
                        continue;
                    };
                    if [Some(r.message.clone()), r.state.clone(), r.outcome.clone()] != w.read {
                        continue;
                    }
                    r.message = m.unwrap_or_default();
                    r.state = st;
                    r.outcome = o;
                    [r.user_id, r.anonymous_id, r.event] = w.keys;
                }
                SealTable::Rejected => {
                    let Some((_, r)) = inner
                        .rejected
                        .iter_mut()
                        .find(|(id, _)| i64::try_from(*id).is_ok_and(|id| id == w.id))
                    else {
                        continue;
                    };
                    if Some(&r.text) != w.read[0].as_ref() {
                        continue;
                    }
                    r.text = m.unwrap_or_default();
                }
            }
            n += 1;
        }
        Ok(n)
    }

    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        let before = inner.rejected.len();
        inner
            .rejected
            .retain(|(id, _)| !i64::try_from(*id).is_ok_and(|id| ids.contains(&id)));
        Ok((before - inner.rejected.len()) as u64)
    }

    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError> {
        self.enter().await?;
        lock(&self.inner).deletions.push(record);
        Ok(())
    }

    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError> {
        self.enter().await?;
        Ok(lock(&self.inner)
            .deletions
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect())
    }

    async fn suppressions(&self) -> Result<Vec<String>, StoreError> {
        self.enter().await?;
        Ok(lock(&self.inner).suppressions.keys().cloned().collect())
    }

    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        Ok(if suppressed {
            let fresh = !inner.suppressions.contains_key(user_hash);
            inner
                .suppressions
                .entry(user_hash.to_owned())
                .or_insert_with(|| (now, operator.to_owned()));
            fresh
        } else {
            inner.suppressions.remove(user_hash).is_some()
        })
    }

    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.enter().await?;
        Ok(lock(&self.inner).settings.get(key).cloned())
    }

    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError> {
        self.enter().await?;
        let mut inner = lock(&self.inner);
        if inner.settings.get(key) != read.as_ref() {
            return Err(StoreError::Conflict(SETTING_CHANGED.into()));
        }
        inner.settings.insert(key.to_owned(), value);
        Ok(())
    }

    async fn known(
        &self,
        source: &str,
        message_ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        self.enter().await?;
        let inner = lock(&self.inner);
        let stored: HashSet<&str> = inner
            .keys
            .keys()
            .filter(|(s, _, _)| s == source)
            .map(|(_, m, _)| m.as_str())
            .collect();
        Ok(message_ids
            .into_iter()
            .filter(|m| stored.contains(m.as_str()))
            .collect())
    }

    fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        *lock(&self.observer) = Some(observer);
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

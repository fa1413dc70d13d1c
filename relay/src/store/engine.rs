//! The [`Store`] both databases share: every operation written once over
//! an [`Engine`], which runs statements and keeps what only its database
//! has (connections, the queue of writes and their group commit, the
//! multi-row insert, the finish of many rows, the migrations).

use super::sql::{self, Cells, Dialect, Stmt};
use super::{
    claim_token, Claimed, CommitObserver, Cursor, DeadLetter, Deletion, Erased, Finish, Hold,
    LogEntry, LogFilter, LoggedCall, Page, Purged, RejectedEntry, RejectedRecord, RejectedRow,
    ReplayFilter, Resealed, Retention, Row, SealRow, SealTable, Stats, Status, Store, StoreError,
    StoredSources, AUDIENCE_CHANGED, SETTING_CHANGED, SOURCES_CHANGED,
};
use async_trait::async_trait;

/// Rows deleted per purge statement. Each chunk is a transaction of its
/// own, so ingest waits behind a purge for one chunk at most (about 10 ms
/// on the machines in BENCHMARKS.md), never for the whole purge, and no
/// transaction holds locks or WAL for long.
pub(crate) const PURGE_CHUNK: i64 = 10_000;

/// Rows made pending again per replay statement, for the same reason as
/// [`PURGE_CHUNK`].
pub(crate) const REPLAY_CHUNK: i64 = PURGE_CHUNK;

/// What one statement of a write gave back: the rows it returned
/// (`SELECT`, `RETURNING`), and how many rows it changed or returned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Written {
    /// Rows changed (or returned).
    pub(crate) count: u64,
    /// Rows returned.
    pub(crate) rows: Vec<Cells>,
}

/// Whose a read is ([`Engine::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// The relay's own, on the way of its work (the next due time, the
    /// audience and sources it works from).
    Relay,
    /// An operator's (the delivery log, counts, lists): it neither waits
    /// behind the relay's reads nor changes the store's health.
    Operator,
}

/// What a guarded write does once its guard has changed a row
/// ([`Engine::write_if`]).
#[derive(Debug, Clone)]
pub(crate) enum Then {
    /// Stores calls, as [`Engine::insert`] does: the result is one
    /// [`Written`] whose count is how many were new.
    Insert(Vec<Row>),
    /// Runs statements: the result is each one's.
    Statements(Vec<Stmt>),
}

/// What a database's store runs statements with.
#[async_trait]
pub(crate) trait Engine: std::fmt::Debug + Send + Sync + 'static {
    /// How its statements are written.
    fn dialect(&self) -> Dialect;
    /// The schema version before and after the migrations ran at open.
    fn migrated(&self) -> (i64, i64);
    /// Calls queued for a write and not yet committed.
    fn backlog(&self) -> usize;
    /// False since a call failed or timed out, until one succeeds.
    fn healthy(&self) -> bool;
    /// SQL statements run so far.
    fn statements(&self) -> u64;
    /// Transactions run again after a conflict.
    fn conflicts(&self) -> u64 {
        0
    }
    /// Bytes appended to the write-ahead log (`Store::wal_bytes`).
    fn wal_bytes(&self) -> Option<u64> {
        None
    }
    /// Whether other relays may use the database.
    fn shared(&self) -> bool;
    /// Where each commit's latency and calls are reported.
    fn set_commit_observer(&self, observer: CommitObserver);
    /// Finishes what is queued and closes.
    async fn close(&self);

    /// Reads: each statement's rows, in order, outside the queue of
    /// writes. A relay's own read ([`Read::Relay`]) that succeeds makes the
    /// store healthy again, and one that fails makes it unhealthy; an
    /// operator's ([`Read::Operator`]: searches, counts, lists) does
    /// neither, and never waits behind the relay's own reads: a slow
    /// search says nothing of ingest.
    async fn read(&self, kind: Read, stmts: Vec<Stmt>) -> Result<Vec<Vec<Cells>>, StoreError>;
    /// A statement on a small table beside the queue (disabled endpoints,
    /// holds, heartbeats): its success says nothing of the queue's tables
    /// (it leaves the health as it is); a failure still counts.
    async fn aside(&self, stmt: Stmt) -> Result<Written, StoreError>;
    /// Statements in one transaction, grouped with the other writes
    /// waiting (group commit); each one's result.
    async fn write(&self, stmts: Vec<Stmt>) -> Result<Vec<Written>, StoreError>;
    /// Stores calls (a call whose (source, messageId) is stored already is
    /// skipped) and refused calls, merged with the other inserts waiting;
    /// how many calls were new, once durable.
    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError>;
    /// `guard`, then, if it changed a row, `then`, in one transaction:
    /// what `then` gave (its statements' results, or one result counting
    /// its new calls), or `None` (nothing written) when `guard` changed
    /// nothing.
    async fn write_if(&self, guard: Stmt, then: Then) -> Result<Option<Vec<Written>>, StoreError>;
    /// How claimed rows ended, each counted only where the row still holds
    /// its claim; how many were refused.
    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError>;
    /// After a purge (SQLite refreshes its planner's statistics).
    async fn after_purge(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Around the deletes of a user's data (`on`, then not): SQLite
    /// overwrites what it deletes meanwhile (`secure_delete`), so the
    /// erased rows do not wait in free pages of the file (the write-ahead
    /// log keeps its copies until checkpoints overwrite it).
    async fn erasing(&self, on: bool) -> Result<(), StoreError> {
        let _ = on;
        Ok(())
    }
}

/// The store over an [`Engine`].
pub(crate) struct SqlStore<E> {
    engine: E,
}

impl<E: Engine> SqlStore<E> {
    /// The store over `engine`.
    pub(crate) fn new(engine: E) -> Self {
        Self { engine }
    }

    fn d(&self) -> Dialect {
        self.engine.dialect()
    }

    /// One statement's rows, read with `of`.
    async fn read_rows<T>(
        &self,
        stmt: Stmt,
        of: impl Fn(&Cells) -> Result<T, StoreError> + Send,
    ) -> Result<Vec<T>, StoreError> {
        let results = self.engine.read(Read::Operator, vec![stmt]).await?;
        sql::rows(results.first().map_or(&[][..], Vec::as_slice), of)
    }

    /// One statement beside the queue, its rows read with `of`.
    async fn aside_rows<T>(
        &self,
        stmt: Stmt,
        of: impl Fn(&Cells) -> Result<T, StoreError> + Send,
    ) -> Result<Vec<T>, StoreError> {
        let written = self.engine.aside(stmt).await?;
        sql::rows(&written.rows, of)
    }

    /// The rows changed by a write's statements, together.
    async fn write_count(&self, stmts: Vec<Stmt>) -> Result<u64, StoreError> {
        if stmts.is_empty() {
            return Ok(0);
        }
        Ok(self
            .engine
            .write(stmts)
            .await?
            .iter()
            .map(|w| w.count)
            .sum())
    }
}

/// The engine's own: no URL, password or row.
impl<E: std::fmt::Debug> std::fmt::Debug for SqlStore<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.engine.fmt(f)
    }
}

#[async_trait]
impl<E: Engine> Store for SqlStore<E> {
    fn migrated(&self) -> (i64, i64) {
        self.engine.migrated()
    }

    fn backlog(&self) -> usize {
        self.engine.backlog()
    }

    fn healthy(&self) -> bool {
        self.engine.healthy()
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
        if rows.is_empty() && rejected.is_empty() {
            return Ok(0);
        }
        self.engine.insert(rows, rejected, trace_parent).await
    }

    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let token = claim_token()?;
        let stmt = sql::claim(
            self.d(),
            now,
            source,
            limit,
            now.saturating_add(lease_ms),
            token,
        );
        let written = self.engine.write(vec![stmt]).await?;
        sql::claimed(written.first().map_or(&[][..], |w| &w.rows), token)
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        if items.is_empty() {
            return Ok(0);
        }
        self.engine.finish(items, now).await
    }

    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        if tokens.is_empty() {
            return Ok(());
        }
        self.write_count(vec![sql::renew(self.d(), tokens, until)])
            .await
            .map(drop)
    }

    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        let results = self
            .engine
            .read(Read::Relay, vec![sql::next_due(now)])
            .await?;
        sql::next_due_of(results.first().map_or(&[][..], Vec::as_slice))
    }

    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        self.write_count(vec![sql::park(self.d(), now, routed)])
            .await
    }

    async fn purge_sources(
        &self,
        now: i64,
        retention: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError> {
        let mut purged = Purged::default();
        let rest = if sources.is_empty() {
            sql::Scope::All
        } else {
            sql::Scope::Except(sources.iter().map(|(s, _)| s.clone()).collect())
        };
        let scopes = std::iter::once((rest, retention))
            .chain(sources.into_iter().map(|(s, r)| (sql::Scope::Only(s), r)));
        let kinds = |r: Retention| {
            [
                (Some(Status::Delivered), r.delivered_ms),
                (Some(Status::Filtered), r.delivered_ms),
                (Some(Status::Undeliverable), r.undeliverable_ms),
                (Some(Status::Dead), r.dead_ms),
                (None, r.rejected_ms),
            ]
        };
        for (scope, r) in scopes {
            for (status, keep_ms) in kinds(r) {
                let before = now.saturating_sub(keep_ms);
                loop {
                    let stmt = match status {
                        Some(s) => sql::purge_finished(self.d(), s, before, &scope, PURGE_CHUNK),
                        None => sql::purge_rejected(self.d(), before, &scope, PURGE_CHUNK),
                    };
                    let n = self.write_count(vec![stmt]).await?;
                    match status {
                        Some(Status::Delivered) => purged.delivered += n,
                        Some(Status::Filtered) => purged.filtered += n,
                        Some(Status::Undeliverable) => purged.undeliverable += n,
                        Some(_) => purged.dead += n,
                        None => purged.rejected += n,
                    }
                    if n < PURGE_CHUNK.unsigned_abs() {
                        break;
                    }
                }
            }
        }
        self.engine.after_purge().await?;
        Ok(purged)
    }

    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError> {
        // In chunks, each a write of its own, as a purge: ingest waits
        // behind one chunk at most, never behind a replay of millions.
        let mut n = 0;
        for stmt in sql::replay(self.d(), now, &filter, REPLAY_CHUNK) {
            loop {
                let changed = self.write_count(vec![stmt.clone()]).await?;
                n += changed;
                if changed < REPLAY_CHUNK.unsigned_abs() {
                    break;
                }
            }
        }
        Ok(n)
    }

    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError> {
        let stmts = sql::replayable(self.d(), &filter);
        if stmts.is_empty() {
            return Ok(0);
        }
        sql::replayable_of(&self.engine.read(Read::Operator, stmts).await?)
    }

    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        let stmt = sql::search(self.d(), &filter, after, limit);
        let rows = self.read_rows(stmt, sql::searched_of(&filter)).await?;
        Ok(Page::of(rows, limit, LogEntry::cursor))
    }

    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        let stmt = sql::search_rejected(self.d(), &filter, after, limit);
        let rows = self.read_rows(stmt, sql::rejected_entry_of).await?;
        Ok(Page::of(rows, limit, RejectedEntry::cursor))
    }

    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError> {
        let stmt = sql::logged_call(source.clone(), message_id);
        let Some(mut call) = self
            .read_rows(stmt, sql::logged_call_of)
            .await?
            .into_iter()
            .find(|c| {
                destination
                    .as_ref()
                    .is_none_or(|d| *d == c.entry.destination)
            })
        else {
            return Ok(None);
        };
        if sql::needs_batch_log(&call) {
            let batch = call.batch.clone().unwrap_or_default();
            let results = self
                .engine
                .read(Read::Operator, vec![sql::batch_lead(&source, &batch)])
                .await?;
            call.batch_log = results
                .first()
                .and_then(|rows| rows.first())
                .map(|r| r.opt_text(0))
                .transpose()?
                .flatten();
        }
        Ok(Some(call))
    }

    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        sql::stats_of(&self.engine.read(Read::Operator, sql::stats(now)).await?)
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        self.read_rows(sql::dead_letters(limit), sql::dead_letter_of)
            .await
    }

    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        self.read_rows(sql::rejected(limit), sql::rejected_of).await
    }

    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        let results = self
            .engine
            .read(Read::Relay, vec![sql::audience_state(source, audience)])
            .await?;
        sql::first_text(results.first().map_or(&[][..], Vec::as_slice))
    }

    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        rows: Vec<Row>,
        now: i64,
    ) -> Result<usize, StoreError> {
        let swap = sql::audience_swap(source, audience, read.as_deref(), &state, now);
        let written = self
            .engine
            .write_if(swap, Then::Insert(rows))
            .await?
            .ok_or_else(|| StoreError::Conflict(AUDIENCE_CHANGED.into()))?;
        Ok(written
            .first()
            .map_or(0, |w| usize::try_from(w.count).unwrap_or(usize::MAX)))
    }

    fn shared(&self) -> bool {
        self.engine.shared()
    }

    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError> {
        if !self.engine.shared() {
            // One relay holds the file (its lock refuses a second), so it
            // shares no endpoint's limits.
            return Ok(1);
        }
        let others = self
            .aside_rows(heartbeat(relay, now, expired), |r| r.int(0))
            .await?
            .first()
            .copied()
            .unwrap_or(0);
        Ok(u32::try_from(others).unwrap_or(u32::MAX).saturating_add(1))
    }

    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.aside_rows(sql::disabled_endpoints(), |r| r.text(0))
            .await
    }

    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        let stmt = if disabled {
            sql::disable_endpoint(url, now)
        } else {
            sql::enable_endpoint(url)
        };
        self.engine.aside(stmt).await.map(drop)
    }

    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.aside_rows(sql::holds(now), sql::hold_of).await
    }

    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        self.engine.aside(sql::put_hold(url, &hold)).await.map(drop)
    }

    async fn stored_sources(&self) -> Result<StoredSources, StoreError> {
        sql::stored_sources_of(&self.engine.read(Read::Relay, sql::stored_sources()).await?)
    }

    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        let then = Then::Statements(sql::write_sources(self.d(), put, remove));
        match self
            .engine
            .write_if(sql::sources_version_swap(version), then)
            .await?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::Conflict(SOURCES_CHANGED.into())),
        }
    }

    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError> {
        // In chunks, each a write of its own, as a purge: a user with
        // millions of calls holds ingest up for one chunk at a time.
        let mut erased = Erased::default();
        self.engine.erasing(true).await?;
        for column in ["user_id", "anonymous_id"] {
            loop {
                let n = self
                    .write_count(vec![sql::erase_calls(column, id, PURGE_CHUNK)])
                    .await?;
                erased.calls += n;
                if n < PURGE_CHUNK.unsigned_abs() {
                    break;
                }
            }
        }
        let needle = serde_json::to_string(id).unwrap_or_default();
        loop {
            let n = self
                .write_count(vec![sql::erase_rejected(self.d(), &needle, PURGE_CHUNK)])
                .await?;
            erased.rejected += n;
            if n < PURGE_CHUNK.unsigned_abs() {
                break;
            }
        }
        self.engine.erasing(false).await?;
        Ok(erased)
    }

    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError> {
        self.write_count(vec![sql::record_deletion(&record)])
            .await
            .map(drop)
    }

    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError> {
        self.read_rows(sql::deletions(limit), sql::deletion_of)
            .await
    }

    async fn suppressions(&self) -> Result<Vec<String>, StoreError> {
        // Beside the queue: the poll's read says nothing of the queue.
        let results = self
            .engine
            .read(Read::Operator, vec![sql::suppressions()])
            .await?;
        sql::rows(results.first().map_or(&[][..], Vec::as_slice), |r| {
            r.text(0)
        })
    }

    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError> {
        let stmt = if suppressed {
            sql::suppress(user_hash, now, operator)
        } else {
            sql::unsuppress(user_hash)
        };
        Ok(self.write_count(vec![stmt]).await? > 0)
    }

    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        // A read of `meta` says nothing of the queue's tables: it leaves the
        // store's health as it is (the slot map's poll succeeding while the
        // queue is locked must not make the relay ready).
        let results = self
            .engine
            .read(Read::Operator, vec![sql::setting(key)])
            .await?;
        sql::first_text(results.first().map_or(&[][..], Vec::as_slice))
    }

    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError> {
        let swap = sql::setting_swap(key, read.as_deref(), &value);
        match self
            .engine
            .write_if(swap, Then::Statements(Vec::new()))
            .await?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::Conflict(SETTING_CHANGED.into())),
        }
    }

    async fn known(
        &self,
        source: &str,
        message_ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError> {
        if message_ids.is_empty() {
            return Ok(Vec::new());
        }
        let stmt = sql::known(self.d(), source, message_ids);
        let results = self.engine.read(Read::Relay, vec![stmt]).await?;
        sql::rows(results.first().map_or(&[][..], Vec::as_slice), |r| {
            r.text(0)
        })
    }

    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError> {
        self.read_rows(sql::sealable(table, after, limit), sql::sealable_of)
            .await
    }

    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError> {
        let stmts = rows
            .iter()
            .map(|r| sql::reseal(self.d(), table, r))
            .collect();
        self.write_count(stmts).await
    }

    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.engine.erasing(true).await?;
        let n = self
            .write_count(vec![sql::erase_rejected_ids(self.d(), ids)])
            .await;
        self.engine.erasing(false).await?;
        n
    }

    fn statements(&self) -> u64 {
        self.engine.statements()
    }

    fn conflicts(&self) -> u64 {
        self.engine.conflicts()
    }

    fn wal_bytes(&self) -> Option<u64> {
        self.engine.wal_bytes()
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        self.engine.set_commit_observer(observer);
    }

    async fn close(&self) {
        self.engine.close().await;
    }
}

/// Says that relay `relay` delivers at `now`, forgets relays last heard
/// from before `expired`, and counts the others: one statement, run only
/// where several relays share the database (Postgres; SQLite's writer
/// takes no statement with several data-modifying parts). A data-modifying
/// CTE's changes are not visible to the SELECT, so this relay is counted
/// by the caller, not here.
fn heartbeat(relay: &str, now: i64, expired: i64) -> Stmt {
    Stmt {
        sql: "WITH seen AS (\
              INSERT INTO senders (relay, seen_at) VALUES (?, ?) \
              ON CONFLICT (relay) DO UPDATE SET seen_at = excluded.seen_at), \
              gone AS (DELETE FROM senders WHERE seen_at < ?) \
              SELECT count(*) FROM senders WHERE relay <> ? AND seen_at >= ?"
            .into(),
        values: vec![
            relay.into(),
            now.into(),
            expired.into(),
            relay.into(),
            expired.into(),
        ],
    }
}

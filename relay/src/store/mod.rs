//! Durable storage: every accepted call, its delivery state, dead letters,
//! refused calls and audience state.
//!
//! One model, one interface ([`Store`]), two databases:
//! * [`sqlite`]: the default, one file, WAL, `synchronous = FULL`, one
//!   writer thread that commits whatever is waiting in one transaction
//!   (group commit);
//! * [`postgres`]: several relays on one database, group commit with up
//!   to 4 transactions at once, `FOR UPDATE SKIP LOCKED` claims.
//!
//! Both merge the inserts of a group: the calls of every request that
//! waited together go in by shared statements, each request still told how
//! many of its calls were new.
//!
//! One table holds a call and its delivery, so the life of a call is three
//! statements: the insert (shared by the whole batch), the claim (one for
//! many) and the finish. A claim carries a token; a finish counts only
//! where the row still holds that token, so a worker whose lease ran out
//! cannot overwrite the result of the worker that took over.
//!
//! Every call to the database has a time limit ([`StoreOptions::timeout`]):
//! past it the caller gets [`StoreError::Timeout`], ingest answers 503 and
//! `/readyz` says not ready, instead of waiting on a stuck database.

mod engine;
pub mod log;
pub mod memory;
pub mod postgres;
pub mod sealed;
pub mod sharded;
mod sql;
pub mod sqlite;

pub use crate::config::{Retention, Synchronous};
use async_trait::async_trait;
pub use callpost_core::protection::Hold;
use callpost_core::Timestamp;
pub use log::{Cursor, LogEntry, LogFilter, LogStatus, LoggedCall, Page, RejectedEntry};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A delivery's status, as stored (the numbers are the schema's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Waiting to be sent, being sent, or waiting for a retry.
    Pending = 0,
    /// A receiver took it (or its integrations turned the destination off
    /// after it was stored).
    Delivered = 1,
    /// It gave up: a dead letter, replayable.
    Dead = 2,
    /// Stored, and not sent: the call turned the Webhooks destination off
    /// (`integrations`), or its source has no enabled destination.
    /// Replayable once the destination is there.
    Undeliverable = 3,
    /// Never sent: the destination's filters keep it out. Kept as long
    /// as delivered calls are; replayable by name (after the filters
    /// change).
    Filtered = 4,
}

impl Status {
    /// The stored number.
    pub fn as_i64(self) -> i64 {
        self as i64
    }

    /// The stored number, as Postgres's `smallint` column takes it.
    pub fn as_i16(self) -> i16 {
        self as i16
    }

    /// The status a stored number stands for.
    pub fn from_i64(n: i64) -> Option<Self> {
        Some(match n {
            0 => Self::Pending,
            1 => Self::Delivered,
            2 => Self::Dead,
            3 => Self::Undeliverable,
            4 => Self::Filtered,
            _ => return None,
        })
    }

    /// The status of a name [`Status::name`] gives.
    pub fn named(name: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Delivered,
            Self::Dead,
            Self::Undeliverable,
            Self::Filtered,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// Its name in the admin API, the CLI and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Dead => "dead",
            Self::Undeliverable => "undeliverable",
            Self::Filtered => "filtered",
        }
    }
}

/// An accepted call's delivery to one destination, as stored: a call is
/// stored once for each destination it goes to.
#[derive(Clone)]
pub struct Row {
    /// The source's name.
    pub source: String,
    /// `messageId`: with `source` and `destination`, the deduplication
    /// key.
    pub message_id: String,
    /// The destination's name ([`NO_DESTINATION_NAME`] when none takes the
    /// call).
    pub destination: String,
    /// Whether this row counts the call in the count of new calls an
    /// insert returns: the first of the call's rows.
    pub first: bool,
    /// The call's type (`track`, …).
    pub kind: &'static str,
    /// The enriched message, as `JSON.stringify` writes it.
    pub message: String,
    /// When it was received, ms since the epoch.
    pub received_at: i64,
    /// [`Status::Pending`] or [`Status::Undeliverable`].
    pub status: Status,
    /// `userId`, for the delivery log's search.
    pub user_id: Option<String>,
    /// `anonymousId`, for the delivery log's search.
    pub anonymous_id: Option<String>,
    /// A track call's `event`, for the delivery log's search.
    pub event: Option<String>,
}

/// The destination of a call no destination takes (its source's triggers
/// all refuse it): kept as undeliverable, never sent.
pub const NO_DESTINATION_NAME: &str = "";

impl Row {
    /// The row of a call the core accepted, for the source's default
    /// destination ([`DEFAULT_DESTINATION`](callpost_core::sources::DEFAULT_DESTINATION)).
    pub fn accepted(
        source: String,
        a: callpost_core::ingest::Accepted,
        received_at: i64,
        status: Status,
    ) -> Self {
        let call = a.call;
        let event = match call.kind {
            callpost_core::call::CallKind::Track => call.event,
            _ => None,
        };
        Self {
            source,
            message_id: a.message_id,
            destination: callpost_core::sources::DEFAULT_DESTINATION.to_owned(),
            first: true,
            kind: call.kind.as_str(),
            message: a.message,
            received_at,
            status,
            user_id: call.user_id.filter(|s| !s.is_empty()),
            anonymous_id: call.anonymous_id.filter(|s| !s.is_empty()),
            event,
        }
    }
}

/// Customer data: the id only.
impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Row")
            .field("source", &self.source)
            .field("message_id", &self.message_id)
            .field("destination", &self.destination)
            .finish_non_exhaustive()
    }
}

/// A call refused on its own inside an accepted batch, kept for review.
#[derive(Clone)]
pub struct RejectedRow {
    /// The source's name.
    pub source: String,
    /// When it was received, ms since the epoch.
    pub received_at: i64,
    /// The core's code.
    pub code: &'static str,
    /// The core's message.
    pub reason: String,
    /// The call's JSON text as it came.
    pub text: String,
}

impl fmt::Debug for RejectedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RejectedRow")
            .field("source", &self.source)
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

/// A delivery a worker holds.
#[derive(Clone)]
pub struct Claimed {
    /// The row's id.
    pub id: i64,
    /// The claim token: the finish counts only while the row holds it.
    pub claim: i64,
    /// The source's name.
    pub source: String,
    /// The destination it goes to.
    pub destination: String,
    /// `messageId`.
    pub message_id: String,
    /// The stored message.
    pub message: String,
    /// The core's saved delivery state, once it has made an attempt.
    pub state: Option<String>,
    /// Attempts made so far.
    pub attempts: i64,
    /// The W3C `traceparent` of the ingest span that stored it (tracing
    /// on): its attempts' spans are that span's children.
    pub trace_parent: Option<String>,
    /// The batch it waits in, if its destination packs calls: the rows of
    /// one batch share its id, and one of them (the batch's lead) keeps
    /// the batch's state.
    pub batch: Option<String>,
    /// The call's type (`track`, …, `delete`).
    pub kind: String,
}

impl fmt::Debug for Claimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claimed")
            .field("id", &self.id)
            .field("source", &self.source)
            .field("destination", &self.destination)
            .field("message_id", &self.message_id)
            .finish_non_exhaustive()
    }
}

/// How a claimed delivery ends its turn. Each counts only where the row
/// still holds `claim`.
#[derive(Debug, Clone)]
pub enum Finish {
    /// A receiver took it (or the core found it not for the destination).
    Delivered {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
        /// Attempts made in all.
        attempts: i64,
        /// The outcome record (JSON) with the attempt log, for the
        /// delivery log (a batch's lead's; the batch's other rows name
        /// their batch instead of repeating its log).
        outcome: Option<String>,
        /// The batch it went in, if any.
        batch: Option<String>,
    },
    /// Not yet: the core's state is saved and the row is due again at
    /// `due_at`.
    Retry {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
        /// Attempts made in all.
        attempts: i64,
        /// The core's saved delivery state (a batch's lead keeps its
        /// batch's, once for all its rows; the others keep none).
        state: Option<String>,
        /// When to claim it again, ms since the epoch.
        due_at: i64,
        /// The batch it waits in, if any.
        batch: Option<String>,
    },
    /// It gave up: a dead letter, with the core's outcome and attempt log
    /// as JSON.
    Dead {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
        /// Attempts made in all.
        attempts: i64,
        /// The core's saved delivery state to keep, if any (the relay's
        /// delivery keeps none: a replay starts afresh, and the attempt
        /// log is in the outcome record).
        state: Option<String>,
        /// The outcome record (JSON).
        outcome: String,
        /// The batch it went in, if any.
        batch: Option<String>,
    },
    /// Its source has no enabled destination now: kept, replayable.
    Undeliverable {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
        /// Why (JSON: `{"kind":"undeliverable","reason":...}`).
        outcome: String,
    },
    /// Its destination's filters keep it out: never sent.
    Filtered {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
        /// The outcome record (JSON: the rule that dropped it).
        outcome: String,
    },
    /// Delivered, and nothing of it kept: a delete notification, whose
    /// body carries the id of a user whose data was erased.
    Forget {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
    },
    /// Given back unchanged (shutdown): claimable again at once.
    Release {
        /// Row id.
        id: i64,
        /// Claim token.
        claim: i64,
    },
}

impl Finish {
    /// The row it ends (each kind names one).
    pub fn id(&self) -> i64 {
        match self {
            Self::Delivered { id, .. }
            | Self::Retry { id, .. }
            | Self::Dead { id, .. }
            | Self::Undeliverable { id, .. }
            | Self::Filtered { id, .. }
            | Self::Forget { id, .. }
            | Self::Release { id, .. } => *id,
        }
    }

    /// The row it ends, to rename (a sharded store's ids outside are not
    /// its groups').
    pub fn id_mut(&mut self) -> &mut i64 {
        match self {
            Self::Delivered { id, .. }
            | Self::Retry { id, .. }
            | Self::Dead { id, .. }
            | Self::Undeliverable { id, .. }
            | Self::Filtered { id, .. }
            | Self::Forget { id, .. }
            | Self::Release { id, .. } => id,
        }
    }
}

/// Which stored calls a replay makes pending again. An empty filter is
/// refused by `ops::replay` before it gets here (a replay of every dead
/// letter is asked for with `all`).
#[derive(Debug, Clone, Default)]
pub struct ReplayFilter {
    /// The calls, as a delivery-log search names them. With a `status`,
    /// only calls in that state; without, dead letters and what the two
    /// flags add.
    pub calls: LogFilter,
    /// Also calls already delivered and still kept.
    pub include_delivered: bool,
    /// Also undeliverable calls (their destination is back).
    pub include_undeliverable: bool,
}

impl ReplayFilter {
    /// Whether it names calls (by anything but their state): without any,
    /// a replay would take every dead letter.
    pub fn names_calls(&self) -> bool {
        self.calls.names_calls()
    }

    /// The finished states it makes pending again, one statement each.
    pub fn statuses(&self) -> Vec<Status> {
        match self.calls.status {
            Some(Status::Pending) => Vec::new(),
            Some(s) => vec![s],
            None => {
                let mut statuses = vec![Status::Dead];
                if self.include_delivered {
                    statuses.push(Status::Delivered);
                }
                if self.include_undeliverable {
                    statuses.push(Status::Undeliverable);
                }
                statuses
            }
        }
    }
}

/// Row counts by state, for `/admin/status`, the CLI and the metrics'
/// gauges (read on an interval, never per scrape).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Pending deliveries (due or waiting for a retry).
    pub pending: i64,
    /// Pending deliveries held by a worker now.
    pub in_flight: i64,
    /// Delivered and still kept.
    pub delivered: i64,
    /// Dead letters.
    pub dead: i64,
    /// Stored and not sent (no destination, or Webhooks turned off).
    pub undeliverable: i64,
    /// Kept out by the destination's filters, never sent.
    pub filtered: i64,
    /// Calls refused inside accepted batches, kept for review.
    pub rejected: i64,
    /// When the oldest pending call was received, ms.
    pub oldest_pending_received_at: Option<i64>,
    /// The earliest due time of a pending call, ms.
    pub next_due_at: Option<i64>,
}

/// The sources kept in the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredSources {
    /// (name, sealed document), by name.
    pub rows: Vec<(String, String)>,
    /// The version of the set: every change raises it.
    pub version: i64,
}

/// Why a change to the sources found the set changed.
pub(crate) const SOURCES_CHANGED: &str =
    "the sources were changed by another writer since they were read";

/// A dead letter, for the admin API and the CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadLetter {
    /// The source's name.
    pub source: String,
    /// The destination that gave it up.
    pub destination: String,
    /// `messageId`.
    pub message_id: String,
    /// The call's type.
    pub kind: String,
    /// Received, ms.
    pub received_at: i64,
    /// Given up, ms.
    pub finished_at: Option<i64>,
    /// Attempts made.
    pub attempts: i64,
    /// The outcome record (JSON text).
    pub outcome: Option<String>,
}

/// A refused call, for the admin API and the CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RejectedRecord {
    /// The source's name.
    pub source: String,
    /// Received, ms.
    pub received_at: i64,
    /// The core's code.
    pub code: String,
    /// The core's message.
    pub reason: String,
    /// The call's JSON text as it came.
    pub text: String,
}

/// Rows deleted by a purge, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Delivered calls.
    pub delivered: u64,
    /// Filtered calls (kept as long as delivered ones).
    pub filtered: u64,
    /// Undeliverable calls.
    pub undeliverable: u64,
    /// Dead letters.
    pub dead: u64,
    /// Refused calls.
    pub rejected: u64,
}

/// What erasing a user removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Erased {
    /// Stored calls' rows (one per destination), in every state.
    pub calls: u64,
    /// Refused calls whose text held the id.
    pub rejected: u64,
}

/// The audit record of a deletion: the user as a keyed hash, never the id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deletion {
    /// HMAC-SHA256 of the id under the relay's secret key (hex); `None`
    /// when the relay had no key.
    pub user_hash: Option<String>,
    /// When, ms.
    pub at: i64,
    /// Who asked (the admin API's `operator`, the CLI's `--operator`).
    pub operator: String,
    /// Rows of stored calls erased.
    pub calls: u64,
    /// Refused calls erased.
    pub rejected: u64,
    /// Whether the user was suppressed too.
    pub suppressed: bool,
}

/// A table whose texts are sealed at rest ([`Store::sealable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealTable {
    /// The stored calls: their message, saved state and outcome (the
    /// answers' starts), with the search columns kept as keyed hashes.
    Calls,
    /// The refused calls' texts.
    Rejected,
}

/// A row's sealable texts as read ([`Store::sealable`]).
#[derive(Clone, PartialEq, Eq)]
pub struct SealRow {
    /// The row's id.
    pub id: i64,
    /// A call's message, state and outcome; a refused call's text first.
    pub texts: [Option<String>; 3],
    /// A call's `user_id`, `anonymous_id` and `event` columns as stored.
    pub keys: [Option<String>; 3],
}

impl fmt::Debug for SealRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealRow")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A row's texts sealed again ([`Store::reseal`]): written only where the
/// row still holds `read`.
#[derive(Clone)]
pub struct Resealed {
    /// The row's id.
    pub id: i64,
    /// The texts as read ([`SealRow::texts`]).
    pub read: [Option<String>; 3],
    /// The texts to write.
    pub texts: [Option<String>; 3],
    /// The search columns to write (a call's).
    pub keys: [Option<String>; 3],
}

impl fmt::Debug for Resealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resealed")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database did not answer within [`StoreOptions::timeout`]: try
    /// again later (ingest answers 503 with `Retry-After`).
    #[error("the database did not answer in time")]
    Timeout,
    /// The database is unreachable or refused the work (the message is
    /// the driver's, with no secrets: connection strings never appear).
    #[error("the database failed: {0}")]
    Unavailable(String),
    /// The store is shutting down.
    #[error("the store is closed")]
    Closed,
    /// Another relay holds the SQLite file, or the schema is newer than
    /// this relay's: run one relay per SQLite file, or upgrade the relay.
    #[error("{0}")]
    Refused(String),
    /// A change made on what another change had already replaced (the
    /// value it expected is gone): read again and try again.
    #[error("{0}")]
    Conflict(String),
}

impl StoreError {
    /// The registry's code.
    pub fn code(&self) -> callpost_core::Code {
        use callpost_core::Code;
        match self {
            Self::Timeout | Self::Unavailable(_) | Self::Closed => Code::Unavailable,
            Self::Refused(_) => Code::DatabaseRefused,
            Self::Conflict(_) => Code::Conflict,
        }
    }
}

/// Store settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// SQLite's `synchronous`: `FULL` (default) or `NORMAL`.
    pub synchronous: Synchronous,
    /// The limit on every database call.
    pub timeout: Duration,
    /// SQLite: take the file's lock and take back leases at open (the only
    /// relay on the file). False for the CLI's commands, which run beside
    /// a live relay.
    pub exclusive: bool,
    /// Postgres: PEM certificates trusted for TLS besides the system's
    /// (`[security] ca_file`).
    pub ca_file: Option<std::path::PathBuf>,
}

/// What the relay needs from storage.
#[async_trait]
pub trait Store: fmt::Debug + Send + Sync + 'static {
    /// The schema version before and after the migrations ran at open.
    fn migrated(&self) -> (i64, i64);

    /// Calls handed to [`Store::insert`] and not yet committed.
    fn backlog(&self) -> usize;

    /// False since the last database call failed or timed out, until one
    /// succeeds: `/readyz` answers 503 meanwhile.
    fn healthy(&self) -> bool;

    /// Stores the calls (a call whose (source, messageId) is stored already
    /// is skipped) and the refused ones, in one transaction; returns how
    /// many calls were new, once durable.
    async fn insert(&self, rows: Vec<Row>, rejected: Vec<RejectedRow>)
        -> Result<usize, StoreError>;

    /// As [`Store::insert`], each call stored with `trace_parent`, the
    /// W3C `traceparent` of the ingest span of the request that carried
    /// them all (tracing on). The context is the request's, not a call's,
    /// so it comes with the insert rather than with each [`Row`]. A store
    /// that keeps no trace context (a test's wrapper) stores the calls
    /// without it.
    async fn insert_traced(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        let _ = trace_parent;
        self.insert(rows, rejected).await
    }

    /// Claims up to `limit` due pending deliveries of `source`, oldest due
    /// first, leased until `now + lease_ms` under one new token (over shard
    /// groups: oldest first and one token within each group, the groups
    /// taking turns; see [`sharded`]).
    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError>;

    /// Stores how claimed deliveries ended; returns how many were refused
    /// because their row no longer holds their token.
    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError>;

    /// Extends the leases of the claims a worker still holds.
    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError>;

    /// The earliest time a pending delivery is due or its lease ends.
    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError>;

    /// Marks the pending deliveries to destinations not in `routed`
    /// ([`routed_key`]s) undeliverable (kept, replayable); returns how
    /// many.
    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError>;

    /// Deletes finished rows older than their kind's retention: each
    /// source in `sources` by its own, every other by `retention`.
    async fn purge_sources(
        &self,
        now: i64,
        retention: Retention,
        sources: Vec<(String, Retention)>,
    ) -> Result<Purged, StoreError>;

    /// As [`Store::purge_sources`], every source by `retention`.
    async fn purge(&self, now: i64, retention: Retention) -> Result<Purged, StoreError> {
        self.purge_sources(now, retention, Vec::new()).await
    }

    /// Makes the matching dead letters (and, as the filter says, delivered
    /// and undeliverable calls) pending again, due now, with a fresh
    /// 4-hour window and the same `messageId`. Returns how many.
    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError>;

    /// How many calls [`Store::replay`] would make pending: its dry run.
    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError>;

    /// The delivery log: the stored calls `filter` names, newest first, at
    /// most `limit` after `after` (see [`log`]).
    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError>;

    /// As [`Store::search`], for refused calls: only `filter`'s source and
    /// times apply (a refused call's fields were never trusted).
    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError>;

    /// One stored call's delivery to `destination` (the first stored,
    /// without one) with its message, saved state and outcome record.
    async fn logged_call(
        &self,
        source: String,
        message_id: String,
        destination: Option<String>,
    ) -> Result<Option<LoggedCall>, StoreError>;

    /// Row counts by state.
    async fn stats(&self, now: i64) -> Result<Stats, StoreError>;

    /// The oldest dead letters first, at most `limit`.
    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError>;

    /// The newest refused calls first, at most `limit`.
    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError>;

    /// An audience's saved sync state (the core's `AudienceSync` JSON).
    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Stores an audience's new state and its identify calls in one
    /// transaction, if the stored state is still `read` (`None`: none
    /// stored); returns how many calls were new. Another state stored
    /// since is [`StoreError::Conflict`], and nothing is written.
    async fn audience_sync(
        &self,
        source: &str,
        audience: &str,
        read: Option<String>,
        state: String,
        rows: Vec<Row>,
        now: i64,
    ) -> Result<usize, StoreError>;

    /// Whether other relays may deliver from this database (Postgres).
    fn shared(&self) -> bool {
        false
    }

    /// Says that relay `relay` is delivering at `now`, forgets relays last
    /// heard from before `expired`, and returns how many deliver, this one
    /// included. A database only one relay can use answers 1.
    async fn heartbeat(&self, relay: &str, now: i64, expired: i64) -> Result<u32, StoreError>;

    /// The endpoint URLs disabled for failing too long.
    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError>;

    /// Records `url` as disabled since `now`, or enabled again.
    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError>;

    /// The endpoint URLs held back at `now` (a pause or an open circuit
    /// that has not ended), by URL.
    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError>;

    /// Records what `url`'s guard holds back: each part kept at the later
    /// of what is stored and `hold`.
    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError>;

    /// The sources kept in the database, and the version of the set.
    async fn stored_sources(&self) -> Result<StoredSources, StoreError>;

    /// Creates or replaces the sources in `put` (name, sealed document) and
    /// removes those named in `remove`, all at once, if the set is still at
    /// `version` (as [`Store::stored_sources`] read it); another change
    /// since is [`StoreError::Conflict`], and nothing is written.
    async fn write_sources(
        &self,
        version: i64,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError>;

    /// Erases every stored call whose `userId` or `anonymousId` is `id`,
    /// in every state (with its attempt log, outcome and saved state, which
    /// live on its row), and every refused call whose text holds `id` as a
    /// JSON string. A worker holding one of the calls finds its row gone:
    /// its finish counts nothing.
    async fn erase_user(&self, id: &str) -> Result<Erased, StoreError>;

    /// Keeps the audit record of a deletion.
    async fn record_deletion(&self, record: Deletion) -> Result<(), StoreError>;

    /// The newest deletion records first, at most `limit`.
    async fn deletions(&self, limit: usize) -> Result<Vec<Deletion>, StoreError>;

    /// The keyed hashes of the suppressed users.
    async fn suppressions(&self) -> Result<Vec<String>, StoreError>;

    /// Suppresses the user `user_hash` names (since `now`, by `operator`),
    /// or lifts it; returns whether that changed anything.
    async fn set_suppressed(
        &self,
        user_hash: &str,
        suppressed: bool,
        now: i64,
        operator: &str,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` rows of `table` after id `after`, in id order, with
    /// their sealable texts: what a rotation seals again and a deletion
    /// opens to find a user in sealed refused calls.
    async fn sealable(
        &self,
        table: SealTable,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SealRow>, StoreError>;

    /// Writes rows sealed again, each only where it still holds what was
    /// read; how many were written.
    async fn reseal(&self, table: SealTable, rows: Vec<Resealed>) -> Result<u64, StoreError>;

    /// Deletes the refused calls `ids`; how many.
    async fn erase_rejected(&self, ids: Vec<i64>) -> Result<u64, StoreError>;

    /// A setting kept in the database (the `meta` table), by key: the
    /// slot map in force ([`sharded`], the key of the user hashes ([`sealed`]).
    async fn setting(&self, key: &str) -> Result<Option<String>, StoreError>;

    /// Stores `value` as `key`'s setting if the stored one is still `read`
    /// (`None`: none stored); another value stored since is
    /// [`StoreError::Conflict`], and nothing is written.
    async fn swap_setting(
        &self,
        key: &str,
        read: Option<String>,
        value: String,
    ) -> Result<(), StoreError>;

    /// Which of `message_ids` of `source` are stored (for any destination):
    /// a moved slot's earlier group is asked before a call is stored in
    /// its new one ([`sharded`]).
    async fn known(
        &self,
        source: &str,
        message_ids: Vec<String>,
    ) -> Result<Vec<String>, StoreError>;

    /// Each shard group's name and whether its last call succeeded, when
    /// there are several ([`sharded`]); empty otherwise.
    fn group_health(&self) -> Vec<(String, bool)> {
        Vec::new()
    }

    /// Reads again what the store keeps in force that other relays may
    /// change (the slot map, [`sharded`]); the relay calls it every
    /// [`SOURCES_POLL_MS`](callpost_core::sources::SOURCES_POLL_MS).
    async fn refresh(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// SQL statements run so far, BEGIN and COMMIT included (for
    /// `callpost_relay_sql_statements_total`).
    fn statements(&self) -> u64;

    /// Bytes appended to the database's write-ahead log so far, when the
    /// relay can count them (SQLite's; a Postgres server's WAL is shared
    /// by every client, and `pg_current_wal_lsn()` tells it).
    fn wal_bytes(&self) -> Option<u64> {
        None
    }

    /// Transactions the database aborted for a deadlock or a serialization
    /// failure, and that ran again (Postgres).
    fn conflicts(&self) -> u64 {
        0
    }

    /// Commits made and calls they carried, and the commit latency
    /// histogram's observations are reported through this hook.
    fn set_commit_observer(&self, observer: CommitObserver);

    /// Finishes what is queued and closes the database.
    async fn close(&self);
}

/// Why a setting's swap found it changed.
pub(crate) const SETTING_CHANGED: &str =
    "the setting was changed by another writer since it was read";

/// Why an audience sync found the audience's state changed.
pub(crate) const AUDIENCE_CHANGED: &str =
    "the audience's state changed since it was read (another sync stored one)";

/// A hold as the tables keep it: (paused_until, open_until, open_ms), ms,
/// 0 for none.
pub(crate) fn hold_columns(h: &Hold) -> (i64, i64, i64) {
    (
        h.paused_until.map_or(0, Timestamp::as_millis),
        h.open_until.map_or(0, Timestamp::as_millis),
        i64::try_from(h.open_ms).unwrap_or(i64::MAX),
    )
}

/// The hold of a row of `endpoint_holds`.
pub(crate) fn hold_of(paused_until: i64, open_until: i64, open_ms: i64) -> Hold {
    let at = |ms: i64| (ms > 0).then(|| Timestamp::from_millis(ms).ok()).flatten();
    Hold {
        paused_until: at(paused_until),
        open_until: at(open_until),
        open_ms: u64::try_from(open_ms).unwrap_or(0),
    }
}

/// How [`Store::park_unrouted`] names a destination in force:
/// `source/destination` (a destination name holds no `/`, so no two pairs
/// share a key).
pub fn routed_key(source: &str, destination: &str) -> String {
    format!("{source}/{destination}")
}

/// A fresh claim token: 62 random bits, positive in any signed 64-bit
/// column (Postgres's BIGINT included), and too many for two claims ever to
/// draw the same one.
pub(crate) fn claim_token() -> Result<i64, StoreError> {
    let bits = getrandom::u64()
        .map_err(|e| StoreError::Unavailable(format!("no randomness for a claim token: {e}")))?;
    Ok(i64::try_from(bits >> 2).unwrap_or(1))
}

/// Called after each commit with its latency and the calls it stored.
pub type CommitObserver = Arc<dyn Fn(Duration, usize) + Send + Sync>;

/// Opens the store a `database` URL names (`sqlite:///path`,
/// `postgresql://…`) and runs its migrations.
pub async fn open(database: &str, options: StoreOptions) -> Result<Arc<dyn Store>, StoreError> {
    if database.starts_with("sqlite://") {
        let path = sqlite::path_of(database)?;
        sqlite::open(path, options).await
    } else if database.starts_with("postgresql://") || database.starts_with("postgres://") {
        postgres::open(database, options).await
    } else {
        Err(StoreError::Refused(
            "database must be sqlite:///path or postgresql://...".into(),
        ))
    }
}

/// The schema's migrations, one list for both databases: each has the same
/// number and name on both (`migrations/sqlite/<name>.sql` and
/// `migrations/postgres/<name>.sql`; a file missing from either is a build
/// error). A database records the last one it ran (`meta.schema_version`),
/// and each open runs the ones after it, in order, in one transaction.
///
/// Each file is the exact SQL its database runs (types, sequences and
/// partial-index syntax differ), which a generated dialect would hide from
/// the operator reading a migration; a migration one database does not
/// need is a statement that does nothing there, with a comment that says
/// why. The store contract (`tests/it/store_contract.rs`) runs the same
/// tests over both.
macro_rules! migrations {
    ($($n:literal: $name:literal,)*) => {
        /// The SQLite migrations.
        pub const SQLITE_MIGRATIONS: &[(i64, &str)] = &[$(
            ($n, include_str!(concat!("../../migrations/sqlite/", $name, ".sql"))),
        )*];
        /// The Postgres migrations.
        pub const POSTGRES_MIGRATIONS: &[(i64, &str)] = &[$(
            ($n, include_str!(concat!("../../migrations/postgres/", $name, ".sql"))),
        )*];
        /// Each migration's name, by number.
        pub const MIGRATIONS: &[(i64, &str)] = &[$(($n, $name),)*];
    };
}

migrations! {
    1: "0001_init",
    2: "0002_fair_claims",
    3: "0003_senders",
    4: "0004_disabled_endpoints",
    5: "0005_sources",
    6: "0006_endpoint_holds",
    7: "0007_delivery_log",
    8: "0008_trace",
    9: "0009_finished_at",
    10: "0010_sources_version",
    11: "0011_batches",
    12: "0012_destinations",
    13: "0013_key_first",
    14: "0014_privacy",
}

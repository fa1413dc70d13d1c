//! Every statement both databases run, written once, and every row they
//! return, read once.
//!
//! A statement is written with `?` placeholders and its values in order
//! ([`Stmt`]); Postgres gets `$1, $2, …` in their place ([`Dialect::text`]).
//! Where the two dialects really differ, [`Dialect`] writes the part that
//! differs (a list bound as one value, `FOR UPDATE SKIP LOCKED`); the
//! statements that differ as a whole (the multi-row insert against
//! `unnest`, the finish of many rows, the migrations, Postgres's
//! heartbeat) stay in `sqlite.rs` and `postgres.rs`. A row comes back as
//! [`Cells`] of [`Value`]s, whatever the database's column types (Postgres's
//! `smallint` and `integer` are integers like `bigint`), and one function
//! per type reads it.
//!
//! Two conventions keep the indexes usable on both: a state is written
//! into the text as a number (`status = 2`), never bound, because a
//! partial index serves a query only when its condition is the query's own
//! text and a bound value is unknown when the statement is planned; and a
//! finished state is written `status <> 0 AND status = n`, which is what
//! the partial index of finished rows (`WHERE status <> 0`) matches.

use super::log::{Cursor, LogEntry, LogFilter, LoggedCall, RejectedEntry};
use super::{
    Claimed, DeadLetter, Hold, RejectedRecord, ReplayFilter, Resealed, SealRow, SealTable, Stats,
    Status, StoreError, StoredSources,
};
use std::borrow::Cow;

/// The database a statement is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite 3.35 or later (`RETURNING`, `UPDATE … FROM`).
    Sqlite,
    /// Postgres 12 or later.
    Postgres,
}

impl Dialect {
    /// `sql` with this dialect's placeholders: `?` as it is for SQLite,
    /// `$1, $2, …` in order for Postgres. A `?` inside a quoted literal is
    /// left alone.
    pub(crate) fn text(self, sql: &str) -> Cow<'_, str> {
        if self == Self::Sqlite || !sql.contains('?') {
            return Cow::Borrowed(sql);
        }
        let mut out = String::with_capacity(sql.len() + 16);
        let mut n = 0;
        let mut quoted = false;
        for c in sql.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    out.push(c);
                }
                '?' if !quoted => {
                    n += 1;
                    out.push('$');
                    out.push_str(&n.to_string());
                }
                _ => out.push(c),
            }
        }
        Cow::Owned(out)
    }

    /// `column`'s text holds the text bound as one value.
    pub(crate) fn contains(self, column: &str) -> String {
        match self {
            Self::Sqlite => format!("instr({column}, ?) > 0"),
            Self::Postgres => format!("strpos({column}, ?) > 0"),
        }
    }

    /// `column` is one of a list bound as one value ([`Value::Texts`] or
    /// [`Value::Ints`]): a JSON array read by `json_each` on SQLite, an
    /// array on Postgres. Any length, one placeholder.
    pub(crate) fn in_list(self, column: &str) -> String {
        match self {
            Self::Sqlite => format!("{column} IN (SELECT value FROM json_each(?))"),
            Self::Postgres => format!("{column} = ANY(?)"),
        }
    }

    /// `column` is none of a list bound as one value.
    pub(crate) fn not_in_list(self, column: &str) -> String {
        match self {
            Self::Sqlite => format!("{column} NOT IN (SELECT value FROM json_each(?))"),
            Self::Postgres => format!("{column} <> ALL(?)"),
        }
    }

    /// What a claim's inner SELECT ends with: Postgres locks the rows it
    /// takes and skips those another relay's claim holds; SQLite has one
    /// writer, which never meets another.
    fn skip_locked(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// How a search's condition names `column`. On SQLite, `+source`: the
    /// source leads only the pending calls' due order, and a handful of
    /// sources each hold a large share of the calls, so that index is never
    /// the way into a search; the unary `+`
    /// keeps SQLite's planner from taking it over the time or field index
    /// (measured: 150 ms against 1 ms for one source's hour in a million
    /// calls). Postgres's planner weighs the indexes by their statistics.
    pub(crate) fn column(self, column: &str) -> Cow<'static, str> {
        match (self, column) {
            (Self::Sqlite, "source") => Cow::Borrowed("+source"),
            _ => Cow::Owned(column.to_owned()),
        }
    }
}

/// A value bound to a statement, or read from a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// SQL NULL.
    Null,
    /// An integer (Postgres: whichever integer type the column has).
    Int(i64),
    /// Text.
    Text(String),
    /// A list of texts bound as one value ([`Dialect::in_list`]).
    Texts(Vec<String>),
    /// A list of integers bound as one value.
    Ints(Vec<i64>),
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<String> for Value {
    fn from(t: String) -> Self {
        Self::Text(t)
    }
}

impl From<&str> for Value {
    fn from(t: &str) -> Self {
        Self::Text(t.to_owned())
    }
}

impl<T: Into<Self>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A statement with `?` placeholders, and its values in order.
#[derive(Debug, Clone)]
pub(crate) struct Stmt {
    /// The text, with `?` placeholders.
    pub(crate) sql: Cow<'static, str>,
    /// The values, one per placeholder.
    pub(crate) values: Vec<Value>,
}

impl Stmt {
    fn new(sql: impl Into<Cow<'static, str>>, values: Vec<Value>) -> Self {
        Self {
            sql: sql.into(),
            values,
        }
    }
}

/// A row as read: its columns, in the statement's order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cells(pub(crate) Vec<Value>);

fn unreadable(i: usize, want: &str, got: &Value) -> StoreError {
    StoreError::Unavailable(format!(
        "column {i} of a row is not {want} (the schema is not the relay's): {}",
        match got {
            Value::Null => "null",
            Value::Int(_) => "an integer",
            Value::Text(_) => "text",
            Value::Texts(_) | Value::Ints(_) => "a list",
        }
    ))
}

impl Cells {
    fn at(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&Value::Null)
    }

    /// An integer column that is never NULL.
    pub(crate) fn int(&self, i: usize) -> Result<i64, StoreError> {
        match self.at(i) {
            Value::Int(n) => Ok(*n),
            other => Err(unreadable(i, "an integer", other)),
        }
    }

    /// An integer column that may be NULL.
    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Int(n) => Ok(Some(*n)),
            other => Err(unreadable(i, "an integer", other)),
        }
    }

    /// A text column that is never NULL.
    pub(crate) fn text(&self, i: usize) -> Result<String, StoreError> {
        match self.at(i) {
            Value::Text(t) => Ok(t.clone()),
            other => Err(unreadable(i, "text", other)),
        }
    }

    /// A text column that may be NULL.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Text(t) => Ok(Some(t.clone())),
            other => Err(unreadable(i, "text", other)),
        }
    }
}

/// Reads every row with `of`.
pub(crate) fn rows<T>(
    rows: &[Cells],
    of: impl Fn(&Cells) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    rows.iter().map(of).collect()
}

fn count(rows: &[Cells]) -> Result<i64, StoreError> {
    rows.first()
        .map_or(Ok(0), |r| r.opt_int(0).map(Option::unwrap_or_default))
}

fn int(n: usize) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

// -- claims, leases, wake-ups ----------------------------------------------

/// Claims up to `limit` due pending rows of `source`, oldest due first,
/// leased until `lease_until` under `token`.
pub(crate) fn claim(
    d: Dialect,
    now: i64,
    source: &str,
    limit: usize,
    lease_until: i64,
    token: i64,
) -> Stmt {
    Stmt::new(
        format!(
            "UPDATE deliveries SET lease_until = ?, claim = ? WHERE id IN (\
             SELECT id FROM deliveries WHERE status = 0 AND source = ? AND due_at <= ? \
             AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at LIMIT ?{}) \
             RETURNING id, source, message_id, message, state, attempts, due_at, trace_parent, \
             batch, destination, kind",
            d.skip_locked()
        ),
        vec![
            lease_until.into(),
            token.into(),
            source.into(),
            now.into(),
            now.into(),
            int(limit),
        ],
    )
}

/// The rows a [`claim`] returned, oldest due first (`RETURNING` keeps no
/// order).
pub(crate) fn claimed(rows: &[Cells], token: i64) -> Result<Vec<Claimed>, StoreError> {
    let mut claimed = rows
        .iter()
        .map(|r| {
            Ok((
                r.int(6)?,
                Claimed {
                    id: r.int(0)?,
                    claim: token,
                    source: r.text(1)?,
                    message_id: r.text(2)?,
                    message: r.text(3)?,
                    state: r.opt_text(4)?,
                    attempts: r.int(5)?,
                    trace_parent: r.opt_text(7)?,
                    batch: r.opt_text(8)?,
                    destination: r.text(9)?,
                    kind: r.text(10)?,
                },
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    claimed.sort_by_key(|(due_at, c)| (*due_at, c.id));
    Ok(claimed.into_iter().map(|(_, c)| c).collect())
}

/// Extends the leases held under `tokens`.
pub(crate) fn renew(d: Dialect, tokens: Vec<i64>, until: i64) -> Stmt {
    Stmt::new(
        format!(
            "UPDATE deliveries SET lease_until = ? WHERE status = 0 AND {}",
            d.in_list("claim")
        ),
        vec![until.into(), Value::Ints(tokens)],
    )
}

/// The earliest time a pending row is due or its lease ends: two index
/// searches (the due order, stopping at the first unleased row; the
/// leased rows), never a scan of the pending rows. `min` ignores a NULL.
pub(crate) fn next_due(now: i64) -> Stmt {
    Stmt::new(
        "SELECT min(t) FROM (\
         SELECT t FROM (SELECT due_at AS t FROM deliveries WHERE status = 0 \
         AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at LIMIT 1) AS due \
         UNION ALL SELECT min(lease_until) AS t FROM deliveries \
         WHERE status = 0 AND lease_until > ?) AS times",
        vec![now.into(), now.into()],
    )
}

/// The earliest time of [`next_due`].
pub(crate) fn next_due_of(rows: &[Cells]) -> Result<Option<i64>, StoreError> {
    rows.first().map_or(Ok(None), |r| r.opt_int(0))
}

/// The outcome recorded on a call parked because its source has no such
/// destination (the core has no code for it: it never sees such a call).
pub(crate) const NO_DESTINATION: &str = r#"{"kind":"undeliverable","reason":"no_destination"}"#;

/// Marks the unleased pending rows whose source and destination are not
/// in `routed` ([`super::routed_key`]s, which the SQL spells the same way)
/// undeliverable.
pub(crate) fn park(d: Dialect, now: i64, routed: Vec<String>) -> Stmt {
    Stmt::new(
        format!(
            "UPDATE deliveries SET status = 3, finished_at = ?, outcome = ?, \
             lease_until = NULL, claim = NULL \
             WHERE status = 0 AND (lease_until IS NULL OR lease_until <= ?) AND {}",
            d.not_in_list("(source || '/' || destination)")
        ),
        vec![
            now.into(),
            NO_DESTINATION.into(),
            now.into(),
            Value::Texts(routed),
        ],
    )
}

// -- retention ---------------------------------------------------------------

/// Deletes up to `chunk` finished rows in `status` that finished before
/// `before`. A finished row's age counts from `finished_at`, which every
/// finished row has (migration 9 gave it to rows an older relay stored
/// without one).
pub(crate) fn purge_finished(
    d: Dialect,
    status: Status,
    before: i64,
    scope: &Scope,
    chunk: i64,
) -> Stmt {
    let (cond, mut values) = scope.sql(d);
    values.extend([before.into(), chunk.into()]);
    Stmt::new(
        format!(
            "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries \
             WHERE status <> 0 AND status = {}{cond} AND finished_at < ? LIMIT ?)",
            status.as_i64()
        ),
        values,
    )
}

/// Deletes up to `chunk` refused calls received before `before`.
pub(crate) fn purge_rejected(d: Dialect, before: i64, scope: &Scope, chunk: i64) -> Stmt {
    let (cond, mut values) = scope.sql(d);
    values.extend([before.into(), chunk.into()]);
    Stmt::new(
        format!(
            "DELETE FROM rejected WHERE id IN \
             (SELECT id FROM rejected WHERE true{cond} AND received_at < ? LIMIT ?)"
        ),
        values,
    )
}

/// Whose rows a purge takes: every source's, one source's (its own
/// retention), or every source's but those (the relay's).
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// Every source's.
    All,
    /// This source's.
    Only(String),
    /// Every source's but these.
    Except(Vec<String>),
}

impl Scope {
    /// The condition (` AND …`, or nothing) and its values.
    fn sql(&self, d: Dialect) -> (String, Vec<Value>) {
        match self {
            Self::All => (String::new(), Vec::new()),
            Self::Only(s) => (" AND source = ?".into(), vec![s.as_str().into()]),
            Self::Except(list) => (
                format!(" AND {}", d.not_in_list("source")),
                vec![Value::Texts(list.clone())],
            ),
        }
    }
}

// -- replay ------------------------------------------------------------------

/// The conditions of `filter` for one replayed finished `status`.
fn replay_where(d: Dialect, filter: &ReplayFilter, status: Status) -> (String, Vec<Value>) {
    let mut calls = filter.calls.clone();
    calls.status = Some(status);
    let (conds, values) = calls.sql(d);
    (format!(" WHERE {}", conds.join(" AND ")), values)
}

/// One UPDATE per finished state `filter` replays, each of at most
/// `chunk` rows: each row pending again, due now, with a fresh window. A
/// replayed row no longer matches, so running one again takes the next
/// rows, until one changes fewer than `chunk`.
pub(crate) fn replay(d: Dialect, now: i64, filter: &ReplayFilter, chunk: i64) -> Vec<Stmt> {
    filter
        .statuses()
        .into_iter()
        .map(|status| {
            let (cond, values) = replay_where(d, filter, status);
            let mut all = vec![Value::Int(now)];
            all.extend(values);
            all.push(Value::Int(chunk));
            Stmt::new(
                format!(
                    "UPDATE deliveries SET status = 0, due_at = ?, state = NULL, outcome = NULL, \
                     attempts = 0, finished_at = NULL, lease_until = NULL, claim = NULL, \
                     batch = NULL WHERE id IN (SELECT id FROM deliveries{cond} LIMIT ?)"
                ),
                all,
            )
        })
        .collect()
}

/// One count per finished state `filter` replays: the dry run.
pub(crate) fn replayable(d: Dialect, filter: &ReplayFilter) -> Vec<Stmt> {
    filter
        .statuses()
        .into_iter()
        .map(|status| {
            let (cond, values) = replay_where(d, filter, status);
            Stmt::new(format!("SELECT count(*) FROM deliveries{cond}"), values)
        })
        .collect()
}

/// The sum of the counts of [`replayable`].
pub(crate) fn replayable_of(counts: &[Vec<Cells>]) -> Result<u64, StoreError> {
    let mut n = 0i64;
    for rows in counts {
        n += count(rows)?;
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

// -- the delivery log --------------------------------------------------------

/// `conds` after `after`, newest first, one row more than `limit` (whether
/// it comes says if there is a next page): the text after `FROM <table>`.
fn page(
    mut conds: Vec<String>,
    mut values: Vec<Value>,
    after: Option<Cursor>,
    limit: usize,
) -> (String, Vec<Value>) {
    if let Some(c) = after {
        conds.push("(received_at, id) < (?, ?)".into());
        values.push(c.received_at.into());
        values.push(c.id.into());
    }
    let mut sql = String::new();
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds.join(" AND "));
    }
    sql.push_str(" ORDER BY received_at DESC, id DESC LIMIT ?");
    values.push(int(limit.saturating_add(1)));
    (sql, values)
}

const ENTRY_COLUMNS: &str = "source, message_id, kind, event, user_id, anonymous_id, \
                             received_at, status, attempts, finished_at, id, destination";

/// A search of the stored calls.
pub(crate) fn search(d: Dialect, filter: &LogFilter, after: Option<Cursor>, limit: usize) -> Stmt {
    let (conds, values) = filter.sql(d);
    let (tail, values) = page(conds, values, after, limit);
    let message = if filter.with_message { ", message" } else { "" };
    Stmt::new(
        format!("SELECT {ENTRY_COLUMNS}{message} FROM deliveries{tail}"),
        values,
    )
}

/// A row of [`search`] with `filter`.
pub(crate) fn searched_of(filter: &LogFilter) -> impl Fn(&Cells) -> Result<LogEntry, StoreError> {
    let with_message = filter.with_message;
    move |r| {
        let mut e = entry_of(r)?;
        if with_message {
            e.message = Some(r.text(12)?);
        }
        Ok(e)
    }
}

/// A stored call as a search lists it ([`ENTRY_COLUMNS`]).
pub(crate) fn entry_of(r: &Cells) -> Result<LogEntry, StoreError> {
    Ok(LogEntry {
        source: r.text(0)?,
        message_id: r.text(1)?,
        kind: r.text(2)?,
        event: r.opt_text(3)?,
        user_id: r.opt_text(4)?,
        anonymous_id: r.opt_text(5)?,
        received_at: r.int(6)?,
        status: Status::from_i64(r.int(7)?).map_or("unknown", Status::name),
        attempts: r.int(8)?,
        finished_at: r.opt_int(9)?,
        id: r.int(10)?,
        destination: r.text(11)?,
        message: None,
    })
}

/// A search of the refused calls: by source and time only.
pub(crate) fn search_rejected(
    d: Dialect,
    filter: &LogFilter,
    after: Option<Cursor>,
    limit: usize,
) -> Stmt {
    let (conds, values) = filter.source_and_times().sql(d);
    let (tail, values) = page(conds, values, after, limit);
    Stmt::new(
        format!("SELECT source, received_at, code, reason, id FROM rejected{tail}"),
        values,
    )
}

/// A refused call as a search lists it.
pub(crate) fn rejected_entry_of(r: &Cells) -> Result<RejectedEntry, StoreError> {
    Ok(RejectedEntry {
        source: r.text(0)?,
        received_at: r.int(1)?,
        status: "rejected",
        code: r.text(2)?,
        reason: r.text(3)?,
        id: r.int(4)?,
    })
}

/// One stored call's rows (one per destination, in the order they were
/// stored) with its message, saved state and outcome.
pub(crate) fn logged_call(source: String, message_id: String) -> Stmt {
    Stmt::new(
        format!(
            "SELECT {ENTRY_COLUMNS}, message, state, outcome, batch FROM deliveries \
             WHERE source = ? AND message_id = ? ORDER BY id"
        ),
        vec![source.into(), message_id.into()],
    )
}

/// The row of [`logged_call`].
pub(crate) fn logged_call_of(r: &Cells) -> Result<LoggedCall, StoreError> {
    Ok(LoggedCall {
        entry: entry_of(r)?,
        message: r.text(12)?,
        state: r.opt_text(13)?,
        outcome: r.opt_text(14)?,
        batch: r.opt_text(15)?,
        batch_log: None,
    })
}

/// Whether a [`logged_call_of`] row is a batch's row that keeps no log of
/// its own (the batch's lead keeps it).
pub(crate) fn needs_batch_log(call: &LoggedCall) -> bool {
    call.batch.is_some()
        && call.state.is_none()
        && call
            .outcome
            .as_deref()
            .is_none_or(|o| !o.contains("\"log\":"))
}

/// The saved state, or else the outcome record, of the lead of `batch` of
/// `source`: the batch's first row, which keeps them for all its rows.
pub(crate) fn batch_lead(source: &str, batch: &str) -> Stmt {
    Stmt::new(
        "SELECT coalesce(state, outcome) FROM deliveries WHERE batch = ? AND source = ? \
         ORDER BY id LIMIT 1",
        vec![batch.into(), source.into()],
    )
}

// -- counts and lists ----------------------------------------------------------

/// The store's counts: the pending rows through the due index, the
/// finished ones by state through the index of finished rows (never the
/// table with its messages), the refused calls.
pub(crate) fn stats(now: i64) -> Vec<Stmt> {
    vec![
        Stmt::new(
            "SELECT count(*), coalesce(sum(CASE WHEN lease_until > ? THEN 1 ELSE 0 END), 0), \
             min(received_at), min(due_at) FROM deliveries WHERE status = 0",
            vec![now.into()],
        ),
        Stmt::new(
            "SELECT status, count(*) FROM deliveries WHERE status <> 0 GROUP BY status",
            vec![],
        ),
        Stmt::new("SELECT count(*) FROM rejected", vec![]),
    ]
}

/// The counts of the rows of [`stats`]' statements.
pub(crate) fn stats_of(results: &[Vec<Cells>]) -> Result<Stats, StoreError> {
    let mut stats = Stats::default();
    let [pending, finished, rejected] = results else {
        return Err(StoreError::Unavailable(
            "the counts came back incomplete".into(),
        ));
    };
    if let Some(r) = pending.first() {
        stats.pending = r.int(0)?;
        stats.in_flight = r.opt_int(1)?.unwrap_or(0);
        stats.oldest_pending_received_at = r.opt_int(2)?;
        stats.next_due_at = r.opt_int(3)?;
    }
    for r in finished {
        let n = r.int(1)?;
        match Status::from_i64(r.int(0)?) {
            Some(Status::Delivered) => stats.delivered = n,
            Some(Status::Dead) => stats.dead = n,
            Some(Status::Undeliverable) => stats.undeliverable = n,
            Some(Status::Filtered) => stats.filtered = n,
            Some(Status::Pending) | None => {}
        }
    }
    stats.rejected = count(rejected)?;
    Ok(stats)
}

/// The oldest dead letters first.
pub(crate) fn dead_letters(limit: usize) -> Stmt {
    Stmt::new(
        "SELECT source, message_id, kind, received_at, finished_at, attempts, outcome, destination \
         FROM deliveries WHERE status <> 0 AND status = 2 ORDER BY received_at, id LIMIT ?",
        vec![int(limit)],
    )
}

/// A row of [`dead_letters`].
pub(crate) fn dead_letter_of(r: &Cells) -> Result<DeadLetter, StoreError> {
    Ok(DeadLetter {
        source: r.text(0)?,
        message_id: r.text(1)?,
        kind: r.text(2)?,
        received_at: r.int(3)?,
        finished_at: r.opt_int(4)?,
        attempts: r.int(5)?,
        outcome: r.opt_text(6)?,
        destination: r.text(7)?,
    })
}

/// The newest refused calls first.
pub(crate) fn rejected(limit: usize) -> Stmt {
    Stmt::new(
        "SELECT source, received_at, code, reason, text FROM rejected ORDER BY id DESC LIMIT ?",
        vec![int(limit)],
    )
}

/// A row of [`rejected`].
pub(crate) fn rejected_of(r: &Cells) -> Result<RejectedRecord, StoreError> {
    Ok(RejectedRecord {
        source: r.text(0)?,
        received_at: r.int(1)?,
        code: r.text(2)?,
        reason: r.text(3)?,
        text: r.text(4)?,
    })
}

// -- audiences ----------------------------------------------------------------

/// An audience's saved state.
pub(crate) fn audience_state(source: &str, audience: &str) -> Stmt {
    Stmt::new(
        "SELECT state FROM audiences WHERE source = ? AND audience = ?",
        vec![source.into(), audience.into()],
    )
}

/// The text of the first column of the first row, if any.
pub(crate) fn first_text(rows: &[Cells]) -> Result<Option<String>, StoreError> {
    rows.first().map_or(Ok(None), |r| r.text(0).map(Some))
}

/// Stores `state` as the audience's, only over the state `read` (`None`:
/// none was stored): the count it changes is 0 when another sync stored
/// one first.
pub(crate) fn audience_swap(
    source: &str,
    audience: &str,
    read: Option<&str>,
    state: &str,
    now: i64,
) -> Stmt {
    match read {
        None => Stmt::new(
            "INSERT INTO audiences (source, audience, state, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (source, audience) DO NOTHING",
            vec![source.into(), audience.into(), state.into(), now.into()],
        ),
        Some(read) => Stmt::new(
            "UPDATE audiences SET state = ?, updated_at = ? \
             WHERE source = ? AND audience = ? AND state = ?",
            vec![
                state.into(),
                now.into(),
                source.into(),
                audience.into(),
                read.into(),
            ],
        ),
    }
}

// -- settings and known calls ---------------------------------------------------

/// A setting's value.
pub(crate) fn setting(key: &str) -> Stmt {
    Stmt::new("SELECT value FROM meta WHERE key = ?", vec![key.into()])
}

/// Stores `value` as `key`'s, only over `read` (`None`: none was stored):
/// the count it changes is 0 when another writer stored one first.
pub(crate) fn setting_swap(key: &str, read: Option<&str>, value: &str) -> Stmt {
    match read {
        None => Stmt::new(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            vec![key.into(), value.into()],
        ),
        Some(read) => Stmt::new(
            "UPDATE meta SET value = ? WHERE key = ? AND value = ?",
            vec![value.into(), key.into(), read.into()],
        ),
    }
}

/// Which of `message_ids` of `source` are stored (the key's index answers
/// it).
pub(crate) fn known(d: Dialect, source: &str, message_ids: Vec<String>) -> Stmt {
    Stmt::new(
        format!(
            "SELECT DISTINCT message_id FROM deliveries WHERE source = ? AND {}",
            d.in_list("message_id")
        ),
        vec![source.into(), Value::Texts(message_ids)],
    )
}

// -- privacy -------------------------------------------------------------------

/// Deletes up to `chunk` stored calls whose `column` (`user_id` or
/// `anonymous_id`, each with its index) is `id`, in every state.
pub(crate) fn erase_calls(column: &'static str, id: &str, chunk: i64) -> Stmt {
    Stmt::new(
        format!(
            "DELETE FROM deliveries WHERE id IN \
             (SELECT id FROM deliveries WHERE {column} = ? LIMIT ?)"
        ),
        vec![id.into(), chunk.into()],
    )
}

/// Deletes up to `chunk` refused calls whose text holds `needle` (the id as
/// a JSON string: a refused call was never parsed, so its text is all
/// there is).
pub(crate) fn erase_rejected(d: Dialect, needle: &str, chunk: i64) -> Stmt {
    Stmt::new(
        format!(
            "DELETE FROM rejected WHERE id IN (SELECT id FROM rejected WHERE {} LIMIT ?)",
            d.contains("text")
        ),
        vec![needle.into(), chunk.into()],
    )
}

/// Deletes the refused calls `ids` (a deletion that opened their sealed
/// texts found the user in them).
pub(crate) fn erase_rejected_ids(d: Dialect, ids: Vec<i64>) -> Stmt {
    Stmt::new(
        format!("DELETE FROM rejected WHERE {}", d.in_list("id")),
        vec![Value::Ints(ids)],
    )
}

// -- sealing -------------------------------------------------------------------

/// Up to `limit` rows of `table` after id `after`, in id order, with the
/// texts a seal covers (and, for a call, its search columns).
pub(crate) fn sealable(table: SealTable, after: i64, limit: usize) -> Stmt {
    Stmt::new(
        match table {
            SealTable::Calls => {
                "SELECT id, message, state, outcome, user_id, anonymous_id, event \
                 FROM deliveries WHERE id > ? ORDER BY id LIMIT ?"
            }
            SealTable::Rejected => {
                "SELECT id, text, NULL, NULL, NULL, NULL, NULL FROM rejected \
                 WHERE id > ? ORDER BY id LIMIT ?"
            }
        },
        vec![after.into(), int(limit)],
    )
}

/// A row of [`sealable`].
pub(crate) fn sealable_of(r: &Cells) -> Result<SealRow, StoreError> {
    Ok(SealRow {
        id: r.int(0)?,
        texts: [r.opt_text(1)?, r.opt_text(2)?, r.opt_text(3)?],
        keys: [r.opt_text(4)?, r.opt_text(5)?, r.opt_text(6)?],
    })
}

/// Writes a row's texts sealed again where it still holds what was read
/// (a finish or a deletion since then wins; the next pass reads it again).
pub(crate) fn reseal(d: Dialect, table: SealTable, row: &Resealed) -> Stmt {
    let same = |c: &str| match d {
        Dialect::Sqlite => format!("{c} IS ?"),
        Dialect::Postgres => format!("{c} IS NOT DISTINCT FROM ?"),
    };
    let [m, st, o] = row.texts.clone();
    let [rm, rst, ro] = row.read.clone();
    match table {
        SealTable::Calls => {
            let [u, a, e] = row.keys.clone();
            Stmt::new(
                format!(
                    "UPDATE deliveries SET message = ?, state = ?, outcome = ?, user_id = ?, \
                     anonymous_id = ?, event = ? WHERE id = ? AND message = ? AND {} AND {}",
                    same("state"),
                    same("outcome")
                ),
                vec![
                    m.into(),
                    st.into(),
                    o.into(),
                    u.into(),
                    a.into(),
                    e.into(),
                    row.id.into(),
                    rm.into(),
                    rst.into(),
                    ro.into(),
                ],
            )
        }
        SealTable::Rejected => Stmt::new(
            "UPDATE rejected SET text = ? WHERE id = ? AND text = ?",
            vec![m.into(), row.id.into(), rm.into()],
        ),
    }
}

/// Keeps the audit record of a deletion.
pub(crate) fn record_deletion(r: &super::Deletion) -> Stmt {
    Stmt::new(
        "INSERT INTO deletions (user_hash, at, operator, calls, rejected, suppressed) \
         VALUES (?, ?, ?, ?, ?, ?)",
        vec![
            r.user_hash.as_deref().into(),
            r.at.into(),
            r.operator.as_str().into(),
            int(usize::try_from(r.calls).unwrap_or(usize::MAX)),
            int(usize::try_from(r.rejected).unwrap_or(usize::MAX)),
            i64::from(r.suppressed).into(),
        ],
    )
}

/// The newest deletion records first, at most `limit`.
pub(crate) fn deletions(limit: usize) -> Stmt {
    Stmt::new(
        "SELECT user_hash, at, operator, calls, rejected, suppressed FROM deletions \
         ORDER BY id DESC LIMIT ?",
        vec![int(limit)],
    )
}

/// A row of [`deletions`].
pub(crate) fn deletion_of(r: &Cells) -> Result<super::Deletion, StoreError> {
    Ok(super::Deletion {
        user_hash: r.opt_text(0)?,
        at: r.int(1)?,
        operator: r.text(2)?,
        calls: u64::try_from(r.int(3)?).unwrap_or(0),
        rejected: u64::try_from(r.int(4)?).unwrap_or(0),
        suppressed: r.int(5)? != 0,
    })
}

/// The suppressed users' hashes.
pub(crate) fn suppressions() -> Stmt {
    Stmt::new(
        "SELECT user_hash FROM suppressions ORDER BY user_hash",
        vec![],
    )
}

/// Suppresses a user's hash (the first record stands).
pub(crate) fn suppress(user_hash: &str, since: i64, operator: &str) -> Stmt {
    Stmt::new(
        "INSERT INTO suppressions (user_hash, since, operator) VALUES (?, ?, ?) \
         ON CONFLICT (user_hash) DO NOTHING",
        vec![user_hash.into(), since.into(), operator.into()],
    )
}

/// Lifts a user's suppression.
pub(crate) fn unsuppress(user_hash: &str) -> Stmt {
    Stmt::new(
        "DELETE FROM suppressions WHERE user_hash = ?",
        vec![user_hash.into()],
    )
}

// -- endpoints, holds and sources -----------------------------------------------

/// The endpoint URLs disabled for failing too long.
pub(crate) fn disabled_endpoints() -> Stmt {
    Stmt::new("SELECT url FROM disabled_endpoints ORDER BY url", vec![])
}

/// Records `url` as disabled since `now` (the first record stands).
pub(crate) fn disable_endpoint(url: &str, now: i64) -> Stmt {
    Stmt::new(
        "INSERT INTO disabled_endpoints (url, since) VALUES (?, ?) ON CONFLICT (url) DO NOTHING",
        vec![url.into(), now.into()],
    )
}

/// Enables `url` again.
pub(crate) fn enable_endpoint(url: &str) -> Stmt {
    Stmt::new(
        "DELETE FROM disabled_endpoints WHERE url = ?",
        vec![url.into()],
    )
}

/// The holds that have not ended at `now`, by URL.
pub(crate) fn holds(now: i64) -> Stmt {
    Stmt::new(
        "SELECT url, paused_until, open_until, open_ms FROM endpoint_holds \
         WHERE paused_until > ? OR open_until > ? ORDER BY url",
        vec![now.into(), now.into()],
    )
}

/// A row of [`holds`].
pub(crate) fn hold_of(r: &Cells) -> Result<(String, Hold), StoreError> {
    Ok((r.text(0)?, super::hold_of(r.int(1)?, r.int(2)?, r.int(3)?)))
}

/// Keeps each part of `url`'s hold at the later of what is stored and
/// `hold`. In an upsert's SET every column reads the row as it was, so
/// `open_ms` compares with the stored `open_until` before it changes.
pub(crate) fn put_hold(url: &str, hold: &Hold) -> Stmt {
    let (paused, open, open_ms) = super::hold_columns(hold);
    Stmt::new(
        "INSERT INTO endpoint_holds (url, paused_until, open_until, open_ms) VALUES (?, ?, ?, ?) \
         ON CONFLICT (url) DO UPDATE SET \
         paused_until = CASE WHEN excluded.paused_until > endpoint_holds.paused_until \
             THEN excluded.paused_until ELSE endpoint_holds.paused_until END, \
         open_ms = CASE WHEN excluded.open_until > endpoint_holds.open_until \
             THEN excluded.open_ms ELSE endpoint_holds.open_ms END, \
         open_until = CASE WHEN excluded.open_until > endpoint_holds.open_until \
             THEN excluded.open_until ELSE endpoint_holds.open_until END",
        vec![url.into(), paused.into(), open.into(), open_ms.into()],
    )
}

/// The sources kept in the database: the set's version, then (name,
/// sealed) by name. Read in this order, a change between the two reads
/// leaves the version behind the rows, and a write over it is refused.
pub(crate) fn stored_sources() -> Vec<Stmt> {
    vec![
        Stmt::new("SELECT version FROM sources_version WHERE id = 1", vec![]),
        Stmt::new("SELECT name, sealed FROM sources ORDER BY name", vec![]),
    ]
}

/// The rows of [`stored_sources`].
pub(crate) fn stored_sources_of(results: &[Vec<Cells>]) -> Result<StoredSources, StoreError> {
    let [version, rows] = results else {
        return Err(StoreError::Unavailable(
            "the sources came back incomplete".into(),
        ));
    };
    Ok(StoredSources {
        version: version.first().map_or(Ok(0), |r| r.int(0))?,
        rows: self::rows(rows, |r| Ok((r.text(0)?, r.text(1)?)))?,
    })
}

/// Raises the sources' version if it is still `version`: the write's
/// guard (it changes no row when another change came first).
pub(crate) fn sources_version_swap(version: i64) -> Stmt {
    Stmt::new(
        "UPDATE sources_version SET version = version + 1 WHERE id = 1 AND version = ?",
        vec![version.into()],
    )
}

/// Removes the sources `remove` and creates or replaces `put`: run after
/// [`sources_version_swap`] in one transaction, so every relay reads the
/// set before or after the change, never half of it.
pub(crate) fn write_sources(
    d: Dialect,
    put: Vec<(String, String)>,
    remove: Vec<String>,
) -> Vec<Stmt> {
    let mut stmts = Vec::with_capacity(put.len() + 1);
    if !remove.is_empty() {
        stmts.push(Stmt::new(
            format!("DELETE FROM sources WHERE {}", d.in_list("name")),
            vec![Value::Texts(remove)],
        ));
    }
    for (name, sealed) in put {
        stmts.push(Stmt::new(
            "INSERT INTO sources (name, sealed) VALUES (?, ?) \
             ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed",
            vec![name.into(), sealed.into()],
        ));
    }
    stmts
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn postgres_gets_numbered_placeholders_outside_literals() {
        let sql = "SELECT '?' FROM t WHERE a = ? AND b IN (?, ?)";
        assert_eq!(Dialect::Sqlite.text(sql), sql);
        assert_eq!(
            Dialect::Postgres.text(sql),
            "SELECT '?' FROM t WHERE a = $1 AND b IN ($2, $3)"
        );
    }

    #[test]
    fn every_statement_has_one_value_per_placeholder() {
        let d = Dialect::Postgres;
        let filter = ReplayFilter {
            calls: LogFilter {
                message_ids: Some(vec!["m".into()]),
                user_id: Some("u".into()),
                since: Some(1),
                ..LogFilter::default()
            },
            include_delivered: true,
            include_undeliverable: true,
        };
        let hold = Hold {
            paused_until: None,
            open_until: None,
            open_ms: 0,
        };
        let mut all = vec![
            claim(d, 1, "s", 10, 2, 3),
            renew(d, vec![1, 2], 3),
            next_due(1),
            park(d, 1, vec!["a".into()]),
            purge_finished(d, Status::Dead, 1, &Scope::All, 10),
            purge_finished(d, Status::Dead, 1, &Scope::Only("s".into()), 10),
            purge_finished(d, Status::Dead, 1, &Scope::Except(vec!["s".into()]), 10),
            purge_rejected(d, 1, &Scope::All, 10),
            purge_rejected(d, 1, &Scope::Except(vec!["s".into()]), 10),
            erase_calls("user_id", "u", 10),
            erase_rejected(d, "\"u\"", 10),
            known(d, "s", vec!["m".into()]),
            search(
                d,
                &filter.calls,
                Some(Cursor {
                    received_at: 1,
                    id: 2,
                }),
                5,
            ),
            search_rejected(d, &filter.calls, None, 5),
            logged_call("s".into(), "m".into()),
            dead_letters(5),
            rejected(5),
            audience_state("s", "a"),
            audience_swap("s", "a", None, "{}", 1),
            audience_swap("s", "a", Some("{}"), "{}", 1),
            disabled_endpoints(),
            disable_endpoint("u", 1),
            enable_endpoint("u"),
            holds(1),
            put_hold("u", &hold),
            sources_version_swap(3),
        ];
        all.extend(stored_sources());
        all.extend(replay(d, 1, &filter, 10));
        all.extend(replayable(d, &filter));
        all.extend(stats(1));
        all.extend(write_sources(
            d,
            vec![("a".into(), "x".into())],
            vec!["b".into()],
        ));
        for s in all {
            let marks = s.sql.matches('?').count();
            assert_eq!(marks, s.values.len(), "{}", s.sql);
            assert!(!d.text(&s.sql).contains('?'), "{}", s.sql);
        }
    }
}

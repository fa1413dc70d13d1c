//! The default store: one SQLite file (see the module docs of `store`).
//!
//! Two connections. The writer is a thread of its own that takes every
//! operation waiting for it and commits them in one transaction (group
//! commit): requests that arrive together share one fsync, and no two
//! writers ever contend for the file. The calls of a group's inserts go in
//! together, by multi-row INSERTs of up to 500 rows whatever insert they
//! came with, so a group of single-call requests costs BEGIN, one INSERT
//! and COMMIT. If a group fails, each of its operations runs again alone,
//! so one bad operation fails only its own caller. The reader answers
//! status queries (counts, dead letters, refused calls, audience state)
//! from a blocking task; in WAL mode it never waits for the writer.
//!
//! Every call waits at most [`StoreOptions::timeout`]. An operation whose
//! caller stopped waiting may still commit afterwards (the insert is
//! deduplicated on (source, messageId), so the sender's retry is
//! harmless), but it is never answered as a success: its answer goes to a
//! channel nobody listens to. An operation whose caller has already gone
//! when the writer reaches it is dropped unrun.

use super::log::{Dialect, SqlValue};
use super::*;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, ErrorCode, OptionalExtension};
use std::collections::hash_map::{Entry, HashMap};
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;
use tokio::sync::oneshot;

/// The file of a `sqlite:///path` URL (`sqlite:////abs/path` for an
/// absolute path, as SQLAlchemy writes them; `:memory:` is refused: the
/// relay's promise is durability).
pub fn path_of(url: &str) -> Result<PathBuf, StoreError> {
    let rest = url.strip_prefix("sqlite://").unwrap_or(url);
    let path = rest.strip_prefix('/').unwrap_or(rest);
    if path.is_empty() || path == ":memory:" {
        return Err(StoreError::Refused(
            "the relay needs a database file: sqlite:///path/to/relay.db".into(),
        ));
    }
    Ok(PathBuf::from(path))
}

/// Rows per multi-row INSERT: 12 parameters each, far below SQLite's
/// 32,766 per statement.
const INSERT_CHUNK: usize = 500;

/// Refused calls per multi-row INSERT: 5 parameters each.
const REJECTED_CHUNK: usize = 500;

/// Tokens per renewal statement.
const IN_CHUNK: usize = 500;

/// Rows deleted per purge statement. Each chunk is a transaction of its
/// own, so ingest waits behind a purge for one chunk at most (about 10 ms
/// on the machines in BENCHMARKS.md), never for the whole purge.
const PURGE_CHUNK: i64 = 10_000;

/// A group stops taking operations once it carries this many calls: the
/// commit's latency stays well under the callers' time limit even when
/// a large backlog waits.
const MAX_GROUP_CALLS: usize = 20_000;

/// Operations per group, for the same reason (claims and finishes carry
/// no calls).
const MAX_GROUP_OPS: usize = 1_000;

/// How often the writer, idle after a failure, tries a small write to
/// find out whether the database answers again: `/readyz` comes back on
/// its own, without waiting for traffic that a not-ready relay does not
/// get.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Prepared statements kept per connection: the fixed statements plus a
/// few sizes of the multi-row INSERT.
const STATEMENT_CACHE: usize = 64;

/// The outcome recorded on a call parked because its source has no
/// destination (the core has no code for it: it never sees such a call).
const NO_DESTINATION: &str = r#"{"kind":"undeliverable","reason":"no_destination"}"#;

/// What both connections and the store share.
struct Shared {
    statements: AtomicU64,
    healthy: AtomicBool,
    backlog: AtomicUsize,
    observer: Mutex<Option<CommitObserver>>,
}

impl Shared {
    fn mark_unhealthy(&self) {
        self.healthy.store(false, Ordering::Release);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A connection that counts the statements it runs.
struct Db {
    conn: Connection,
    shared: Arc<Shared>,
}

impl Db {
    fn tick(&self, n: u64) {
        self.shared.statements.fetch_add(n, Ordering::Relaxed);
    }

    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        self.tick(1);
        stmt.execute(params)
    }

    fn query_one<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let mut stmt = self.conn.prepare_cached(sql)?;
        self.tick(1);
        stmt.query_row(params, f)
    }

    /// Ends a transaction that failed, if one is still open.
    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            self.tick(1);
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// How a driver error reaches the caller: a busy or locked file is a
/// database that did not answer in time (its `busy_timeout` is the
/// store's time limit); anything else is the driver's message, which
/// names no values.
fn store_error(e: &rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Timeout,
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// One operation for the writer, type-erased so that one queue carries
/// them all.
trait Job: Send {
    /// Calls it stores (for the backlog and the commit observer).
    fn calls(&self) -> usize;
    /// Whether its caller stopped waiting.
    fn abandoned(&self) -> bool;
    /// Runs it inside the open transaction, keeping its result until the
    /// commit. Runs again if its group fails.
    fn run(&mut self, db: &Db) -> rusqlite::Result<()>;
    /// An insert's calls and refused calls: the writer stores those of a
    /// whole group together, then hands each insert its count with
    /// [`Job::stored`] instead of calling [`Job::run`].
    fn to_store(&self) -> Option<Part<'_>> {
        None
    }
    /// Keeps how many of its calls were new, as `run` would have.
    fn stored(&mut self, _new: usize) {}
    /// Sends the result kept by `run`, or `error`.
    fn answer(self: Box<Self>, error: Option<StoreError>);
}

/// One insert's calls, refused calls and trace context.
type Part<'a> = (&'a [Row], &'a [RejectedRow], Option<&'a str>);

/// [`Store::insert`]'s operation.
struct Insert {
    rows: Vec<Row>,
    rejected: Vec<RejectedRow>,
    trace_parent: Option<String>,
    new: Option<usize>,
    tx: oneshot::Sender<Result<usize, StoreError>>,
}

impl Job for Insert {
    fn calls(&self) -> usize {
        self.rows.len() + self.rejected.len()
    }

    fn abandoned(&self) -> bool {
        self.tx.is_closed()
    }

    fn run(&mut self, db: &Db) -> rusqlite::Result<()> {
        self.new = None;
        let new = store_calls(
            db,
            &[(&self.rows, &self.rejected, self.trace_parent.as_deref())],
        )?;
        self.new = new.first().copied();
        Ok(())
    }

    fn to_store(&self) -> Option<Part<'_>> {
        Some((&self.rows, &self.rejected, self.trace_parent.as_deref()))
    }

    fn stored(&mut self, new: usize) {
        self.new = Some(new);
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        let result = match (error, self.new) {
            (Some(e), _) => Err(e),
            (None, Some(n)) => Ok(n),
            (None, None) => Err(StoreError::Unavailable("the operation did not run".into())),
        };
        let _ = self.tx.send(result);
    }
}

struct Op<R, F> {
    f: F,
    out: Option<R>,
    tx: oneshot::Sender<Result<R, StoreError>>,
    calls: usize,
}

impl<R, F> Job for Op<R, F>
where
    R: Send + 'static,
    F: FnMut(&Db) -> rusqlite::Result<R> + Send + 'static,
{
    fn calls(&self) -> usize {
        self.calls
    }

    fn abandoned(&self) -> bool {
        self.tx.is_closed()
    }

    fn run(&mut self, db: &Db) -> rusqlite::Result<()> {
        self.out = None;
        self.out = Some((self.f)(db)?);
        Ok(())
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        let result = match (error, self.out) {
            (Some(e), _) => Err(e),
            (None, Some(v)) => Ok(v),
            (None, None) => Err(StoreError::Unavailable("the operation did not run".into())),
        };
        // The caller may have stopped waiting: then nobody hears of it.
        let _ = self.tx.send(result);
    }
}

type Queue = Sender<Box<dyn Job>>;

/// One SQLite file, one writer thread (group commit).
pub struct SqliteStore {
    shared: Arc<Shared>,
    queue: Mutex<Option<Queue>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    reader: Arc<Mutex<Option<Db>>>,
    lock_file: Mutex<Option<File>>,
    timeout: Duration,
    migrated: (i64, i64),
}

impl SqliteStore {
    /// Opens (creating it 0600) and migrates the file.
    ///
    /// With [`StoreOptions::exclusive`] it also takes `<path>.lock` (a
    /// second relay on the same file is refused) and takes back every
    /// lease: the only relay on this file, so whatever was leased belonged
    /// to a relay that is gone, and its attempts are made again now.
    pub async fn open(path: PathBuf, options: StoreOptions) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared {
            statements: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            backlog: AtomicUsize::new(0),
            observer: Mutex::new(None),
        });
        let opened = {
            let shared = shared.clone();
            let options = options.clone();
            tokio::task::spawn_blocking(move || open_files(&path, &options, &shared))
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))??
        };
        let Opened {
            writer,
            reader,
            lock_file,
            migrated,
        } = opened;
        let (queue, jobs) = mpsc::channel::<Box<dyn Job>>();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("callpost-relay-sqlite-writer".into())
                .spawn(move || write_loop(&writer, &jobs, &shared))
                .map_err(|e| StoreError::Unavailable(format!("cannot start the writer: {e}")))?
        };
        Ok(Self {
            shared,
            queue: Mutex::new(Some(queue)),
            writer: Mutex::new(Some(thread)),
            reader: Arc::new(Mutex::new(Some(reader))),
            lock_file: Mutex::new(lock_file),
            timeout: options.timeout,
            migrated,
        })
    }

    /// Hands `f` to the writer and waits for its commit, at most the
    /// store's time limit.
    async fn write<R, F>(&self, calls: usize, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnMut(&Db) -> rusqlite::Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job = Box::new(Op {
            f,
            out: None,
            tx,
            calls,
        });
        self.submit(job, calls, rx).await
    }

    /// Queues `job` for the writer and waits for its answer on `rx`, at
    /// most the store's time limit.
    async fn submit<R>(
        &self,
        job: Box<dyn Job>,
        calls: usize,
        rx: oneshot::Receiver<Result<R, StoreError>>,
    ) -> Result<R, StoreError> {
        {
            let queue = lock(&self.queue);
            let Some(queue) = queue.as_ref() else {
                return Err(StoreError::Closed);
            };
            self.shared.backlog.fetch_add(calls, Ordering::AcqRel);
            if queue.send(job).is_err() {
                self.shared.backlog.fetch_sub(calls, Ordering::AcqRel);
                return Err(StoreError::Closed);
            }
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(result)) => result,
            // The writer is gone without answering: the store is closing.
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => {
                self.shared.mark_unhealthy();
                Err(StoreError::Timeout)
            }
        }
    }

    /// Runs `f` on the reader connection, at most the store's time limit.
    async fn read<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Db) -> rusqlite::Result<R> + Send + 'static,
    {
        let reader = self.reader.clone();
        let task = tokio::task::spawn_blocking(move || {
            let reader = lock(&reader);
            match reader.as_ref() {
                Some(db) => f(db).map_err(|e| store_error(&e)),
                None => Err(StoreError::Closed),
            }
        });
        let result = match tokio::time::timeout(self.timeout, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
            Err(_) => Err(StoreError::Timeout),
        };
        if matches!(&result, Err(e) if *e != StoreError::Closed) {
            self.shared.mark_unhealthy();
        }
        result
    }
}

struct Opened {
    writer: Db,
    reader: Db,
    lock_file: Option<File>,
    migrated: (i64, i64),
}

fn open_files(
    path: &Path,
    options: &StoreOptions,
    shared: &Arc<Shared>,
) -> Result<Opened, StoreError> {
    let shown = path.display();
    // SQLite creates the file with the process's umask (often 0644), and
    // its -wal and -shm files take the main file's mode: created here
    // first, they are all private.
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| StoreError::Unavailable(format!("cannot open {shown}: {e}")))?;
    let lock_file = if options.exclusive {
        Some(take_lock(path)?)
    } else {
        None
    };
    let connect = || -> Result<Db, StoreError> {
        let conn = Connection::open(path).map_err(|e| store_error(&e))?;
        let db = Db {
            conn,
            shared: shared.clone(),
        };
        configure(&db, options).map_err(|e| store_error(&e))?;
        Ok(db)
    };
    let writer = connect()?;
    let migrated = migrate(&writer)?;
    optimize(&writer).map_err(|e| store_error(&e))?;
    if options.exclusive {
        writer
            .exec(
                "UPDATE deliveries SET lease_until = NULL, claim = NULL \
                 WHERE status = 0 AND lease_until IS NOT NULL",
                [],
            )
            .map_err(|e| store_error(&e))?;
    }
    let reader = connect()?;
    Ok(Opened {
        writer,
        reader,
        lock_file,
        migrated,
    })
}

/// One relay per SQLite file: a second one would take the first one's
/// leases back at its start. Several relays share work through Postgres.
fn take_lock(path: &Path) -> Result<File, StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&name)
        .map_err(|e| {
            StoreError::Unavailable(format!("cannot open {}: {e}", Path::new(&name).display()))
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StoreError::Refused(format!(
            "another relay is using {}; run one relay per SQLite file, or share Postgres",
            path.display()
        ))),
        Err(TryLockError::Error(e)) => Err(StoreError::Unavailable(format!(
            "cannot lock {}: {e}",
            Path::new(&name).display()
        ))),
    }
}

fn configure(db: &Db, options: &StoreOptions) -> rusqlite::Result<()> {
    db.conn.busy_timeout(options.timeout)?;
    db.conn
        .set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    db.tick(2);
    db.conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
    db.conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA analysis_limit = {ANALYSIS_LIMIT}",
        options.synchronous.as_str()
    ))
}

/// Rows `PRAGMA optimize` reads of each index to keep the planner's
/// statistics (SQLite's suggestion is a few hundred to a thousand): the
/// delivery log's searches need them to take the user's index over the
/// event's when both are named, and reading a sample keeps the run to
/// milliseconds on a table of millions.
const ANALYSIS_LIMIT: u32 = 1000;

/// Refreshes the planner's statistics of every table that changed enough
/// since they were taken, or never had them (SQLite decides; `0x10002`
/// looks at every table, not only those this connection queried): at open
/// and after each purge.
fn optimize(db: &Db) -> rusqlite::Result<()> {
    db.tick(1);
    db.conn.execute_batch("PRAGMA optimize = 0x10002")
}

/// Runs the migrations after the stored version in one IMMEDIATE
/// transaction; returns the version before and after.
fn migrate(db: &Db) -> Result<(i64, i64), StoreError> {
    let latest = SQLITE_MIGRATIONS.last().map_or(0, |m| m.0);
    db.exec(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        [],
    )
    .map_err(|e| store_error(&e))?;
    db.exec("BEGIN IMMEDIATE", [])
        .map_err(|e| store_error(&e))?;
    let run = || -> Result<i64, StoreError> {
        let stored: Option<String> = db
            .query_one(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| store_error(&e))?;
        let before = match stored {
            None => 0,
            Some(v) => v.trim().parse::<i64>().map_err(|_| {
                StoreError::Refused(format!(
                    "the database's schema_version is not a number: {v:?}"
                ))
            })?,
        };
        if before > latest {
            return Err(StoreError::Refused(format!(
                "the database has schema version {before}, newer than this relay's {latest}"
            )));
        }
        for (version, sql) in SQLITE_MIGRATIONS {
            if *version > before {
                // One file, counted as one statement.
                db.tick(1);
                db.conn.execute_batch(sql).map_err(|e| store_error(&e))?;
            }
        }
        db.exec(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [latest.to_string()],
        )
        .map_err(|e| store_error(&e))?;
        Ok(before)
    };
    match run() {
        Ok(before) => {
            if let Err(e) = db.exec("COMMIT", []) {
                db.rollback();
                return Err(store_error(&e));
            }
            Ok((before, latest))
        }
        Err(e) => {
            db.rollback();
            Err(e)
        }
    }
}

// -- the writer ----------------------------------------------------------

fn write_loop(db: &Db, jobs: &Receiver<Box<dyn Job>>, shared: &Shared) {
    loop {
        let first = if shared.healthy.load(Ordering::Acquire) {
            match jobs.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        } else {
            match jobs.recv_timeout(PROBE_INTERVAL) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) => {
                    probe(db, shared);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let mut group = Vec::new();
        let mut calls = 0;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            if job.abandoned() {
                settle(shared, job, Some(StoreError::Timeout));
            } else {
                calls += job.calls().max(1);
                group.push(job);
            }
            if calls >= MAX_GROUP_CALLS || group.len() >= MAX_GROUP_OPS {
                break;
            }
            next = jobs.try_recv().ok();
        }
        if !group.is_empty() {
            commit(db, group, shared);
        }
    }
}

/// Answers a job and takes its calls off the backlog (first: a caller
/// that has its answer sees a backlog without it).
fn settle(shared: &Shared, job: Box<dyn Job>, error: Option<StoreError>) {
    shared.backlog.fetch_sub(job.calls(), Ordering::AcqRel);
    job.answer(error);
}

/// Why a group failed.
enum GroupError {
    /// The transaction could not start: the same for every operation.
    Begin(rusqlite::Error),
    /// An operation or the commit failed: perhaps one operation's fault.
    Work(rusqlite::Error),
}

fn commit(db: &Db, mut group: Vec<Box<dyn Job>>, shared: &Shared) {
    let started = Instant::now();
    match run_group(db, &mut group) {
        Ok(()) => {
            shared.healthy.store(true, Ordering::Release);
            let calls = group.iter().map(|j| j.calls()).sum();
            let observer = lock(&shared.observer).clone();
            if let Some(observe) = observer {
                observe(started.elapsed(), calls);
            }
            for job in group {
                settle(shared, job, None);
            }
        }
        Err(GroupError::Work(_)) if group.len() > 1 => {
            // One bad operation must not fail the others: each again, alone
            // (but not one whose caller has stopped waiting meanwhile).
            for job in group {
                if job.abandoned() {
                    settle(shared, job, Some(StoreError::Timeout));
                } else {
                    commit(db, vec![job], shared);
                }
            }
        }
        Err(GroupError::Begin(e) | GroupError::Work(e)) => {
            shared.mark_unhealthy();
            let error = store_error(&e);
            for job in group {
                settle(shared, job, Some(error.clone()));
            }
        }
    }
}

fn run_group(db: &Db, group: &mut [Box<dyn Job>]) -> Result<(), GroupError> {
    db.exec("BEGIN IMMEDIATE", []).map_err(GroupError::Begin)?;
    if let Err(e) = run_jobs(db, group) {
        db.rollback();
        return Err(GroupError::Work(e));
    }
    if let Err(e) = db.exec("COMMIT", []) {
        db.rollback();
        return Err(GroupError::Work(e));
    }
    Ok(())
}

/// The group's work: first every insert's calls together (the operations
/// of a group wait together, so any order of them is one their callers
/// could have seen), then the other operations in the order they came.
fn run_jobs(db: &Db, group: &mut [Box<dyn Job>]) -> rusqlite::Result<()> {
    let inserts: Vec<usize> = (0..group.len())
        .filter(|&i| group[i].to_store().is_some())
        .collect();
    if !inserts.is_empty() {
        let parts: Vec<_> = inserts
            .iter()
            .filter_map(|&i| group[i].to_store())
            .collect();
        let new = store_calls(db, &parts)?;
        for (&i, n) in inserts.iter().zip(new) {
            group[i].stored(n);
        }
    }
    for job in group.iter_mut() {
        if job.to_store().is_none() {
            job.run(db)?;
        }
    }
    Ok(())
}

/// A small real write (it reaches the WAL and its fsync): healthy again
/// once it commits.
fn probe(db: &Db, shared: &Shared) {
    let wrote = db.exec("BEGIN IMMEDIATE", []).and_then(|_| {
        db.exec(
            "UPDATE meta SET value = value WHERE key = 'schema_version'",
            [],
        )?;
        db.exec("COMMIT", [])
    });
    if wrote.is_ok() {
        shared.healthy.store(true, Ordering::Release);
    } else {
        db.rollback();
    }
}

// -- statements ------------------------------------------------------------

fn insert_sql(n: usize, returning: bool) -> String {
    let mut sql = String::with_capacity(250 + n * 18);
    sql.push_str(
        "INSERT INTO deliveries \
         (source, message_id, kind, message, received_at, status, due_at, finished_at, \
         user_id, anonymous_id, event, trace_parent) VALUES ",
    );
    for i in 0..n {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?,?,?,?,?,?,?,?)");
    }
    sql.push_str(" ON CONFLICT (source, message_id) DO NOTHING");
    if returning {
        sql.push_str(" RETURNING source, message_id");
    }
    sql
}

fn rejected_sql(n: usize) -> String {
    let mut sql = String::with_capacity(80 + n * 12);
    sql.push_str("INSERT INTO rejected (source, received_at, code, reason, text) VALUES ");
    for i in 0..n {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?)");
    }
    sql
}

/// Stores the calls and refused calls of one or more inserts in as few
/// statements as their number allows; returns how many of each insert's
/// calls were new, as if the inserts had run one after the other: a call
/// whose (source, messageId) an earlier insert of the same group carries
/// is not new, and only the first one is stored.
///
/// A row is due when it is received; a row stored already finished
/// (undeliverable) finished then, which is where its retention starts.
fn store_calls(db: &Db, parts: &[Part<'_>]) -> rusqlite::Result<Vec<usize>> {
    let mut new = vec![0; parts.len()];
    let mut owner: HashMap<(&str, &str), usize> = HashMap::new();
    let mut rows: Vec<(&Row, usize)> = Vec::new();
    for (i, (part, _, _)) in parts.iter().enumerate() {
        for r in *part {
            if let Entry::Vacant(e) = owner.entry((&r.source, &r.message_id)) {
                e.insert(i);
                rows.push((r, i));
            }
        }
    }
    for chunk in rows.chunks(INSERT_CHUNK) {
        // Rows come in their inserts' order: a chunk whose first and last
        // rows are one insert's is that insert's alone, and the count of
        // rows changed is its count. Otherwise the new rows are named, and
        // each counts for the insert that carried it first.
        let alone = match (chunk.first(), chunk.last()) {
            (Some(first), Some(last)) if first.1 == last.1 => Some(first.1),
            _ => None,
        };
        let mut stmt = db
            .conn
            .prepare_cached(&insert_sql(chunk.len(), alone.is_none()))?;
        let mut i = 0;
        for (r, part) in chunk {
            let trace_parent = parts.get(*part).and_then(|p| p.2);
            let finished_at = (r.status != Status::Pending).then_some(r.received_at);
            stmt.raw_bind_parameter(i + 1, &r.source)?;
            stmt.raw_bind_parameter(i + 2, &r.message_id)?;
            stmt.raw_bind_parameter(i + 3, r.kind)?;
            stmt.raw_bind_parameter(i + 4, &r.message)?;
            stmt.raw_bind_parameter(i + 5, r.received_at)?;
            stmt.raw_bind_parameter(i + 6, r.status.as_i64())?;
            stmt.raw_bind_parameter(i + 7, r.received_at)?;
            stmt.raw_bind_parameter(i + 8, finished_at)?;
            stmt.raw_bind_parameter(i + 9, &r.user_id)?;
            stmt.raw_bind_parameter(i + 10, &r.anonymous_id)?;
            stmt.raw_bind_parameter(i + 11, &r.event)?;
            stmt.raw_bind_parameter(i + 12, trace_parent)?;
            i += 12;
        }
        db.tick(1);
        if let Some(only) = alone {
            new[only] += stmt.raw_execute()?;
        } else {
            let mut stored = stmt.raw_query();
            while let Some(r) = stored.next()? {
                let key = (r.get_ref(0)?.as_str()?, r.get_ref(1)?.as_str()?);
                if let Some(&i) = owner.get(&key) {
                    new[i] += 1;
                }
            }
        }
    }
    let rejected: Vec<&RejectedRow> = parts.iter().flat_map(|(_, r, _)| r.iter()).collect();
    for chunk in rejected.chunks(REJECTED_CHUNK) {
        let mut stmt = db.conn.prepare_cached(&rejected_sql(chunk.len()))?;
        let mut i = 0;
        for r in chunk {
            stmt.raw_bind_parameter(i + 1, &r.source)?;
            stmt.raw_bind_parameter(i + 2, r.received_at)?;
            stmt.raw_bind_parameter(i + 3, r.code)?;
            stmt.raw_bind_parameter(i + 4, &r.reason)?;
            stmt.raw_bind_parameter(i + 5, &r.text)?;
            i += 5;
        }
        db.tick(1);
        stmt.raw_execute()?;
    }
    Ok(new)
}

/// `?,?,…` for `n` values.
fn marks(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}

fn sql_int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// SQLite's placeholders; a list is one JSON parameter, however long.
struct Sqlite;

impl Dialect for Sqlite {
    fn mark(&mut self) -> String {
        "?".into()
    }

    fn in_list(&mut self, column: &str) -> String {
        format!("{column} IN (SELECT value FROM json_each(?))")
    }

    /// `+source`: the source is indexed only as the head of (source,
    /// messageId) and of the pending calls' due order, and a handful of
    /// sources each hold a large share of the calls, so that index is
    /// never the way into a search; the unary `+` keeps SQLite's planner
    /// from taking it over the time or field index (measured: 150 ms
    /// against 1 ms for one source's hour in a million calls).
    fn column(&self, column: &str) -> String {
        if column == "source" {
            "+source".into()
        } else {
            column.to_owned()
        }
    }
}

fn bind(values: Vec<SqlValue>) -> Vec<Value> {
    values
        .into_iter()
        .map(|v| match v {
            SqlValue::Int(n) => Value::Integer(n),
            SqlValue::Text(t) => Value::Text(t),
            // A list of strings always serializes.
            SqlValue::List(l) => Value::Text(serde_json::to_string(&l).unwrap_or_default()),
        })
        .collect()
}

/// The conditions of `filter` for one replayed `status`, after
/// `status <> 0` (which lets SQLite read the index of finished rows, never
/// the whole table).
fn replay_where(filter: &ReplayFilter, status: Status) -> (String, Vec<Value>) {
    let mut calls = filter.calls.clone();
    calls.status = None;
    let (conds, values) = calls.sql(&mut Sqlite);
    let mut sql = String::from(" WHERE status <> 0 AND status = ?");
    for c in conds {
        sql.push_str(" AND ");
        sql.push_str(&c);
    }
    let mut all = vec![Value::Integer(status.as_i64())];
    all.extend(bind(values));
    (sql, all)
}

/// One UPDATE per replayed status.
fn replay_rows(db: &Db, now: i64, filter: &ReplayFilter) -> rusqlite::Result<u64> {
    let mut n = 0;
    for status in filter.statuses() {
        let (cond, values) = replay_where(filter, status);
        let sql = format!(
            "UPDATE deliveries SET status = 0, due_at = ?, state = NULL, outcome = NULL, \
             attempts = 0, finished_at = NULL, lease_until = NULL, claim = NULL{cond}"
        );
        let mut stmt = db.conn.prepare(&sql)?;
        db.tick(1);
        let mut all = vec![Value::Integer(now)];
        all.extend(values);
        n += stmt.execute(params_from_iter(&all))? as u64;
    }
    Ok(n)
}

fn replayable_rows(db: &Db, filter: &ReplayFilter) -> rusqlite::Result<u64> {
    let mut n: i64 = 0;
    for status in filter.statuses() {
        let (cond, values) = replay_where(filter, status);
        let sql = format!("SELECT count(*) FROM deliveries{cond}");
        db.tick(1);
        n += db
            .conn
            .prepare(&sql)?
            .query_row(params_from_iter(&values), |r| r.get::<_, i64>(0))?;
    }
    Ok(u64::try_from(n).unwrap_or(0))
}

/// `filter`'s conditions after `after`, newest first: the text after
/// `FROM <table>` and its values.
fn page_sql(
    conds: Vec<String>,
    values: Vec<SqlValue>,
    after: Option<Cursor>,
    limit: usize,
) -> (String, Vec<Value>) {
    let mut conds = conds;
    let mut values = bind(values);
    if let Some(c) = after {
        conds.push("(received_at, id) < (?, ?)".into());
        values.push(Value::Integer(c.received_at));
        values.push(Value::Integer(c.id));
    }
    let mut sql = String::new();
    if !conds.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conds.join(" AND "));
    }
    // One row more than asked: whether it comes says if there is a next
    // page.
    sql.push_str(" ORDER BY received_at DESC, id DESC LIMIT ?");
    values.push(Value::Integer(sql_int(limit.saturating_add(1))));
    (sql, values)
}

const ENTRY_COLUMNS: &str = "source, message_id, kind, event, user_id, anonymous_id, \
                             received_at, status, attempts, finished_at, id";

fn entry_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<LogEntry> {
    let status: i64 = r.get(7)?;
    Ok(LogEntry {
        source: r.get(0)?,
        message_id: r.get(1)?,
        kind: r.get(2)?,
        event: r.get(3)?,
        user_id: r.get(4)?,
        anonymous_id: r.get(5)?,
        received_at: r.get(6)?,
        status: Status::from_i64(status).map_or("unknown", Status::name),
        attempts: r.get(8)?,
        finished_at: r.get(9)?,
        id: r.get(10)?,
    })
}

fn stats_of(db: &Db, now: i64) -> rusqlite::Result<Stats> {
    let mut stats = Stats::default();
    // Each count reads an index that holds only its rows, never the
    // whole table with its messages.
    let (pending, in_flight, oldest, next_due) = db.query_one(
        "SELECT count(*), coalesce(sum(lease_until > ?), 0), min(received_at), min(due_at) \
         FROM deliveries WHERE status = 0",
        [now],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    stats.pending = pending;
    stats.in_flight = in_flight;
    stats.oldest_pending_received_at = oldest;
    stats.next_due_at = next_due;
    {
        let mut stmt = db.conn.prepare_cached(
            "SELECT status, count(*) FROM deliveries WHERE status <> 0 GROUP BY status",
        )?;
        db.tick(1);
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let n: i64 = r.get(1)?;
            match Status::from_i64(r.get(0)?) {
                Some(Status::Delivered) => stats.delivered = n,
                Some(Status::Dead) => stats.dead = n,
                Some(Status::Undeliverable) => stats.undeliverable = n,
                Some(Status::Pending) | None => {}
            }
        }
    }
    stats.rejected = db.query_one("SELECT count(*) FROM rejected", [], |r| r.get(0))?;
    Ok(stats)
}

#[async_trait]
impl Store for SqliteStore {
    fn migrated(&self) -> (i64, i64) {
        self.migrated
    }

    fn backlog(&self) -> usize {
        self.shared.backlog.load(Ordering::Acquire)
    }

    fn healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Acquire)
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
        let calls = rows.len() + rejected.len();
        if calls == 0 {
            return Ok(0);
        }
        let (tx, rx) = oneshot::channel();
        let job = Box::new(Insert {
            rows,
            rejected,
            trace_parent,
            new: None,
            tx,
        });
        self.submit(job, calls, rx).await
    }

    async fn claim(
        &self,
        now: i64,
        source: &str,
        limit: usize,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        let token = claim_token()?;
        let source = source.to_owned();
        let limit = sql_int(limit);
        self.write(0, move |db| {
            let mut stmt = db.conn.prepare_cached(
                "UPDATE deliveries SET lease_until = ?, claim = ? WHERE id IN (\
                 SELECT id FROM deliveries WHERE status = 0 AND source = ? AND due_at <= ? \
                 AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at LIMIT ?) \
                 RETURNING id, source, message_id, message, state, attempts, due_at, \
                 trace_parent",
            )?;
            db.tick(1);
            let mut rows = stmt.query(params![
                now.saturating_add(lease_ms),
                token,
                source,
                now,
                now,
                limit
            ])?;
            let mut claimed = Vec::new();
            while let Some(r) = rows.next()? {
                let due_at: i64 = r.get(6)?;
                claimed.push((
                    due_at,
                    Claimed {
                        id: r.get(0)?,
                        claim: token,
                        source: r.get(1)?,
                        message_id: r.get(2)?,
                        message: r.get(3)?,
                        state: r.get(4)?,
                        attempts: r.get(5)?,
                        trace_parent: r.get(7)?,
                    },
                ));
            }
            // RETURNING comes in the table's order; workers get the
            // oldest due first.
            claimed.sort_by_key(|(due_at, c)| (*due_at, c.id));
            Ok(claimed.into_iter().map(|(_, c)| c).collect())
        })
        .await
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        if items.is_empty() {
            return Ok(0);
        }
        self.write(0, move |db| {
            let mut changed = 0;
            let mut delivered = Vec::new();
            let mut retry = Vec::new();
            let mut dead = Vec::new();
            let mut undeliverable = Vec::new();
            let mut release = Vec::new();
            for f in &items {
                match f {
                    Finish::Delivered { .. } => delivered.push(f),
                    Finish::Retry { .. } => retry.push(f),
                    Finish::Dead { .. } => dead.push(f),
                    Finish::Undeliverable { .. } => undeliverable.push(f),
                    Finish::Release { .. } => release.push(f),
                }
            }
            if !delivered.is_empty() {
                // The common end, one statement for all of them: the rows
                // (id, claim token, attempts, outcome) go in as one JSON
                // array, and each is found by its primary key.
                let list: Vec<(i64, i64, i64, Option<&str>)> = delivered
                    .iter()
                    .filter_map(|f| match f {
                        Finish::Delivered {
                            id,
                            claim,
                            attempts,
                            outcome,
                        } => Some((*id, *claim, *attempts, outcome.as_deref())),
                        _ => None,
                    })
                    .collect();
                let json = serde_json::to_string(&list).unwrap_or_default();
                let mut stmt = db.conn.prepare_cached(
                    "UPDATE deliveries SET status = 1, finished_at = ?1, attempts = j.value ->> 2, \
                     outcome = j.value ->> 3, state = NULL, lease_until = NULL, claim = NULL \
                     FROM json_each(?2) AS j \
                     WHERE deliveries.id = j.value ->> 0 AND deliveries.claim = j.value ->> 1",
                )?;
                db.tick(1);
                changed += stmt.execute(params![now, json])?;
            }
            if !retry.is_empty() {
                let mut stmt = db.conn.prepare_cached(
                    "UPDATE deliveries SET state = ?, due_at = ?, attempts = ?, \
                     lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                )?;
                for f in retry {
                    if let Finish::Retry {
                        id,
                        claim,
                        attempts,
                        state,
                        due_at,
                    } = f
                    {
                        db.tick(1);
                        changed += stmt.execute(params![state, due_at, attempts, id, claim])?;
                    }
                }
            }
            if !dead.is_empty() {
                let mut stmt = db.conn.prepare_cached(
                    "UPDATE deliveries SET status = 2, state = ?, outcome = ?, finished_at = ?, \
                     attempts = ?, lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                )?;
                for f in dead {
                    if let Finish::Dead {
                        id,
                        claim,
                        attempts,
                        state,
                        outcome,
                    } = f
                    {
                        db.tick(1);
                        changed += stmt.execute(params![state, outcome, now, attempts, id, claim])?;
                    }
                }
            }
            if !undeliverable.is_empty() {
                let mut stmt = db.conn.prepare_cached(
                    "UPDATE deliveries SET status = 3, outcome = ?, finished_at = ?, \
                     lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                )?;
                for f in undeliverable {
                    if let Finish::Undeliverable { id, claim, outcome } = f {
                        db.tick(1);
                        changed += stmt.execute(params![outcome, now, id, claim])?;
                    }
                }
            }
            if !release.is_empty() {
                let mut stmt = db.conn.prepare_cached(
                    "UPDATE deliveries SET lease_until = NULL, claim = NULL WHERE id = ? AND claim = ?",
                )?;
                for f in release {
                    if let Finish::Release { id, claim } = f {
                        db.tick(1);
                        changed += stmt.execute(params![id, claim])?;
                    }
                }
            }
            Ok(items.len().saturating_sub(changed))
        })
        .await
    }

    async fn renew(&self, tokens: Vec<i64>, until: i64) -> Result<(), StoreError> {
        if tokens.is_empty() {
            return Ok(());
        }
        self.write(0, move |db| {
            for chunk in tokens.chunks(IN_CHUNK) {
                let sql = format!(
                    "UPDATE deliveries SET lease_until = ? WHERE status = 0 AND claim IN ({})",
                    marks(chunk.len())
                );
                let mut stmt = db.conn.prepare_cached(&sql)?;
                db.tick(1);
                stmt.execute(params_from_iter(std::iter::once(&until).chain(chunk)))?;
            }
            Ok(())
        })
        .await
    }

    async fn next_due(&self, now: i64) -> Result<Option<i64>, StoreError> {
        self.read(move |db| {
            // Two index searches (deliveries_due in due order, stopping at
            // the first unleased call; deliveries_leased), never a scan of
            // the pending calls, however many wait.
            db.query_one(
                "SELECT min(t) FROM (\
                 SELECT due_at AS t FROM (SELECT due_at FROM deliveries WHERE status = 0 \
                 AND (lease_until IS NULL OR lease_until <= ?1) ORDER BY due_at LIMIT 1) \
                 UNION ALL SELECT min(lease_until) FROM deliveries \
                 WHERE status = 0 AND lease_until > ?1)",
                [now],
                |r| r.get(0),
            )
        })
        .await
    }

    async fn park_unrouted(&self, now: i64, routed: Vec<String>) -> Result<u64, StoreError> {
        self.write(0, move |db| {
            let mut sql = String::from(
                "UPDATE deliveries SET status = 3, finished_at = ?, outcome = ?, \
                 lease_until = NULL, claim = NULL \
                 WHERE status = 0 AND (lease_until IS NULL OR lease_until <= ?)",
            );
            if !routed.is_empty() {
                sql.push_str(&format!(" AND source NOT IN ({})", marks(routed.len())));
            }
            let mut values = vec![
                Value::Integer(now),
                Value::Text(NO_DESTINATION.into()),
                Value::Integer(now),
            ];
            values.extend(routed.iter().cloned().map(Value::Text));
            let mut stmt = db.conn.prepare(&sql)?;
            db.tick(1);
            Ok(stmt.execute(params_from_iter(values))? as u64)
        })
        .await
    }

    async fn purge(&self, now: i64, retention: Retention) -> Result<Purged, StoreError> {
        let mut purged = Purged::default();
        let kinds = [
            (Status::Delivered, retention.delivered_ms),
            (Status::Undeliverable, retention.undeliverable_ms),
            (Status::Dead, retention.dead_ms),
        ];
        for (status, keep_ms) in kinds {
            let before = now.saturating_sub(keep_ms);
            let status = status.as_i64();
            loop {
                // `status <> 0` lets SQLite use the partial index of
                // finished rows.
                let n = self
                    .write(0, move |db| {
                        db.exec(
                            "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries \
                             WHERE status <> 0 AND status = ? AND finished_at < ? LIMIT ?)",
                            params![status, before, PURGE_CHUNK],
                        )
                    })
                    .await?;
                let n = n as u64;
                match status {
                    1 => purged.delivered += n,
                    2 => purged.dead += n,
                    _ => purged.undeliverable += n,
                }
                if n < PURGE_CHUNK as u64 {
                    break;
                }
            }
        }
        let before = now.saturating_sub(retention.rejected_ms);
        loop {
            let n = self
                .write(0, move |db| {
                    db.exec(
                        "DELETE FROM rejected WHERE id IN \
                         (SELECT id FROM rejected WHERE received_at < ? LIMIT ?)",
                        params![before, PURGE_CHUNK],
                    )
                })
                .await? as u64;
            purged.rejected += n;
            if n < PURGE_CHUNK as u64 {
                break;
            }
        }
        self.write(0, optimize).await?;
        Ok(purged)
    }

    async fn replay(&self, now: i64, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.write(0, move |db| replay_rows(db, now, &filter)).await
    }

    async fn replayable(&self, filter: ReplayFilter) -> Result<u64, StoreError> {
        self.read(move |db| replayable_rows(db, &filter)).await
    }

    async fn search(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<LogEntry>, StoreError> {
        self.read(move |db| {
            let (conds, values) = filter.sql(&mut Sqlite);
            let (tail, values) = page_sql(conds, values, after, limit);
            let sql = format!("SELECT {ENTRY_COLUMNS} FROM deliveries{tail}");
            db.tick(1);
            let mut stmt = db.conn.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(params_from_iter(&values), entry_of)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Page::of(rows, limit, LogEntry::cursor))
        })
        .await
    }

    async fn search_rejected(
        &self,
        filter: LogFilter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page<RejectedEntry>, StoreError> {
        self.read(move |db| {
            let only = filter.source_and_times();
            let (conds, values) = only.sql(&mut Sqlite);
            let (tail, values) = page_sql(conds, values, after, limit);
            let sql = format!("SELECT source, received_at, code, reason, id FROM rejected{tail}");
            db.tick(1);
            let mut stmt = db.conn.prepare_cached(&sql)?;
            let rows = stmt
                .query_map(params_from_iter(&values), |r| {
                    Ok(RejectedEntry {
                        source: r.get(0)?,
                        received_at: r.get(1)?,
                        status: "rejected",
                        code: r.get(2)?,
                        reason: r.get(3)?,
                        id: r.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Page::of(rows, limit, RejectedEntry::cursor))
        })
        .await
    }

    async fn logged_call(
        &self,
        source: String,
        message_id: String,
    ) -> Result<Option<LoggedCall>, StoreError> {
        self.read(move |db| {
            let sql = format!(
                "SELECT {ENTRY_COLUMNS}, message, state, outcome FROM deliveries \
                 WHERE source = ? AND message_id = ?"
            );
            db.tick(1);
            db.conn
                .prepare_cached(&sql)?
                .query_row([source, message_id], |r| {
                    Ok(LoggedCall {
                        entry: entry_of(r)?,
                        message: r.get(11)?,
                        state: r.get(12)?,
                        outcome: r.get(13)?,
                    })
                })
                .optional()
        })
        .await
    }

    async fn stats(&self, now: i64) -> Result<Stats, StoreError> {
        self.read(move |db| stats_of(db, now)).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, StoreError> {
        let limit = sql_int(limit);
        self.read(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT source, message_id, kind, received_at, finished_at, attempts, outcome \
                 FROM deliveries WHERE status = 2 ORDER BY received_at, id LIMIT ?",
            )?;
            db.tick(1);
            let rows = stmt.query_map([limit], |r| {
                Ok(DeadLetter {
                    source: r.get(0)?,
                    message_id: r.get(1)?,
                    kind: r.get(2)?,
                    received_at: r.get(3)?,
                    finished_at: r.get(4)?,
                    attempts: r.get(5)?,
                    outcome: r.get(6)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn rejected(&self, limit: usize) -> Result<Vec<RejectedRecord>, StoreError> {
        let limit = sql_int(limit);
        self.read(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT source, received_at, code, reason, text FROM rejected \
                 ORDER BY id DESC LIMIT ?",
            )?;
            db.tick(1);
            let rows = stmt.query_map([limit], |r| {
                Ok(RejectedRecord {
                    source: r.get(0)?,
                    received_at: r.get(1)?,
                    code: r.get(2)?,
                    reason: r.get(3)?,
                    text: r.get(4)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn audience_state(
        &self,
        source: &str,
        audience: &str,
    ) -> Result<Option<String>, StoreError> {
        let (source, audience) = (source.to_owned(), audience.to_owned());
        self.read(move |db| {
            db.query_one(
                "SELECT state FROM audiences WHERE source = ? AND audience = ?",
                [source, audience],
                |r| r.get(0),
            )
            .optional()
        })
        .await
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
        let (source, audience) = (source.to_owned(), audience.to_owned());
        let stored = self
            .write(rows.len(), move |db| {
                // Over the state read, or nothing: the calls go in only
                // with the state that decided them.
                let swapped = match &read {
                    None => db.exec(
                        "INSERT INTO audiences (source, audience, state, updated_at) \
                         VALUES (?,?,?,?) ON CONFLICT (source, audience) DO NOTHING",
                        params![source, audience, state, now],
                    )?,
                    Some(read) => db.exec(
                        "UPDATE audiences SET state = ?, updated_at = ? \
                         WHERE source = ? AND audience = ? AND state = ?",
                        params![state, now, source, audience, read],
                    )?,
                };
                if swapped == 0 {
                    return Ok(None);
                }
                Ok(store_calls(db, &[(&rows, &[], None)])?.first().copied())
            })
            .await?;
        match stored {
            Some(new) => Ok(new),
            None => Err(StoreError::Conflict(AUDIENCE_CHANGED.into())),
        }
    }

    /// One relay holds the file (its lock refuses a second), so it
    /// shares no endpoint's limits.
    async fn heartbeat(&self, _relay: &str, _now: i64, _expired: i64) -> Result<u32, StoreError> {
        Ok(1)
    }

    async fn disabled_endpoints(&self) -> Result<Vec<String>, StoreError> {
        self.read(|db| {
            let mut stmt = db
                .conn
                .prepare_cached("SELECT url FROM disabled_endpoints ORDER BY url")?;
            db.tick(1);
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect()
        })
        .await
    }

    async fn set_endpoint_disabled(
        &self,
        url: &str,
        disabled: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        let url = url.to_owned();
        self.write(0, move |db| {
            if disabled {
                db.exec(
                    "INSERT INTO disabled_endpoints (url, since) VALUES (?, ?) \
                     ON CONFLICT (url) DO NOTHING",
                    params![url, now],
                )?;
            } else {
                db.exec("DELETE FROM disabled_endpoints WHERE url = ?", params![url])?;
            }
            Ok(())
        })
        .await
    }

    async fn holds(&self, now: i64) -> Result<Vec<(String, Hold)>, StoreError> {
        self.read(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT url, paused_until, open_until, open_ms FROM endpoint_holds \
                 WHERE paused_until > ?1 OR open_until > ?1 ORDER BY url",
            )?;
            db.tick(1);
            let rows = stmt.query_map(params![now], |r| {
                Ok((r.get(0)?, hold_of(r.get(1)?, r.get(2)?, r.get(3)?)))
            })?;
            rows.collect()
        })
        .await
    }

    async fn put_hold(&self, url: &str, hold: Hold) -> Result<(), StoreError> {
        let url = url.to_owned();
        let (paused, open, open_ms) = hold_columns(&hold);
        self.write(0, move |db| {
            db.exec(
                "INSERT INTO endpoint_holds (url, paused_until, open_until, open_ms) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (url) DO UPDATE SET \
                 paused_until = max(paused_until, excluded.paused_until), \
                 open_ms = CASE WHEN excluded.open_until > open_until \
                     THEN excluded.open_ms ELSE open_ms END, \
                 open_until = max(open_until, excluded.open_until)",
                params![url, paused, open, open_ms],
            )?;
            Ok(())
        })
        .await
    }

    async fn stored_sources(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.read(|db| {
            let mut stmt = db
                .conn
                .prepare_cached("SELECT name, sealed FROM sources ORDER BY name")?;
            db.tick(1);
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
        .await
    }

    async fn write_sources(
        &self,
        put: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), StoreError> {
        self.write(0, move |db| {
            for name in &remove {
                db.exec("DELETE FROM sources WHERE name = ?", params![name])?;
            }
            for (name, sealed) in &put {
                db.exec(
                    "INSERT INTO sources (name, sealed) VALUES (?, ?) \
                     ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed",
                    params![name, sealed],
                )?;
            }
            Ok(())
        })
        .await
    }

    fn statements(&self) -> u64 {
        self.shared.statements.load(Ordering::Relaxed)
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        *lock(&self.shared.observer) = Some(observer);
    }

    /// The writer commits what is queued, then stops; the connections
    /// close and the file's lock is released. Calls made afterwards get
    /// [`StoreError::Closed`]. Closing twice is harmless.
    async fn close(&self) {
        // The writer's loop ends once the queue is empty and its only
        // sender is gone.
        drop(lock(&self.queue).take());
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
        let reader = self.reader.clone();
        let _ = tokio::task::spawn_blocking(move || drop(lock(&reader).take())).await;
        if let Some(file) = lock(&self.lock_file).take() {
            let _ = file.unlock();
        }
    }
}

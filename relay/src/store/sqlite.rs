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
//! deduplicated on (messageId, source, destination), so the sender's retry is
//! harmless), but it is never answered as a success: its answer goes to a
//! channel nobody listens to. An operation whose caller has already gone
//! when the writer reaches it is dropped unrun.

use super::engine::{Engine, Read, SqlStore, Then, Written};
use super::sql::{Cells, Dialect, Stmt, Value};
use super::*;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
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

/// Rows per multi-row INSERT: 13 parameters each, far below SQLite's
/// 32,766 per statement.
const INSERT_CHUNK: usize = 500;

/// Refused calls per multi-row INSERT: 5 parameters each.
const REJECTED_CHUNK: usize = 500;

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

/// What both connections and the store share.
struct Shared {
    statements: AtomicU64,
    /// Bytes appended to the write-ahead log: frames and their headers.
    wal_bytes: AtomicU64,
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

/// Opens (creating it 0600) and migrates the SQLite file at `path`.
///
/// With [`StoreOptions::exclusive`] it also takes `<path>.lock` (a second
/// relay on the same file is refused) and takes back every lease: the only
/// relay on this file, so whatever was leased belonged to a relay that is
/// gone, and its attempts are made again now.
pub async fn open(path: PathBuf, options: StoreOptions) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(SqlStore::new(Sqlite::open(path, options).await?)))
}

/// One SQLite file, one writer thread (group commit).
pub(crate) struct Sqlite {
    shared: Arc<Shared>,
    queue: Mutex<Option<Queue>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Ends after the writer (see `checkpoints`).
    checkpointer: Mutex<Option<JoinHandle<()>>>,
    reader: Reader,
    /// The operators' reads (the delivery log, counts, lists), on a
    /// connection of their own: a slow search never holds the relay's own
    /// reads back.
    operator: Reader,
    lock_file: Mutex<Option<File>>,
    timeout: Duration,
    migrated: (i64, i64),
}

/// No path, no row.
impl fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sqlite")
            .field("migrated", &self.migrated)
            .field("healthy", &self.shared.healthy.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Sqlite {
    /// Opens and migrates the file (see [`open`]).
    async fn open(path: PathBuf, options: StoreOptions) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared {
            statements: AtomicU64::new(0),
            wal_bytes: AtomicU64::new(0),
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
            operator,
            checkpointer,
            lock_file,
            migrated,
        } = opened;
        let checkpointer = std::thread::Builder::new()
            .name("callpost-relay-sqlite-checkpoint".into())
            .spawn(move || checkpoints(&checkpointer.0, &checkpointer.1))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the checkpointer: {e}")))?;
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
            checkpointer: Mutex::new(Some(checkpointer)),
            reader: Reader::new(reader),
            operator: Reader::new(operator),
            lock_file: Mutex::new(lock_file),
            timeout: options.timeout,
            migrated,
        })
    }

    /// Hands `f` to the writer and waits for its commit, at most the
    /// store's time limit.
    async fn write_with<R, F>(&self, calls: usize, f: F) -> Result<R, StoreError>
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

    /// Runs `f` on a reader connection, at most the store's time limit: the
    /// relay's own reader, whose failure makes the store unhealthy, or the
    /// operators' (`kind`). A read past the limit is interrupted, so its
    /// connection is free again at once.
    async fn read_with<R, F>(&self, kind: Read, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Db) -> rusqlite::Result<R> + Send + 'static,
    {
        let reader = match kind {
            Read::Relay => &self.reader,
            Read::Operator => &self.operator,
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        // Waiting for the connection is async and bounded: a read that
        // cannot have it in time gives up without a thread parked on it.
        let result =
            match tokio::time::timeout_at(deadline, reader.gate.clone().acquire_owned()).await {
                Err(_) => Err(StoreError::Timeout),
                Ok(Err(_)) => Err(StoreError::Closed),
                Ok(Ok(permit)) => {
                    let db = reader.db.clone();
                    let task = tokio::task::spawn_blocking(move || {
                        let _permit = permit;
                        match lock(&db).as_ref() {
                            Some(db) => f(db).map_err(|e| store_error(&e)),
                            None => Err(StoreError::Closed),
                        }
                    });
                    match tokio::time::timeout_at(deadline, task).await {
                        Ok(Ok(result)) => result,
                        Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
                        Err(_) => {
                            // The statement stops at its next step and the
                            // connection (and its permit) is free again.
                            reader.interrupt.interrupt();
                            Err(StoreError::Timeout)
                        }
                    }
                }
            };
        if kind == Read::Relay && matches!(&result, Err(e) if *e != StoreError::Closed) {
            self.shared.mark_unhealthy();
        }
        result
    }
}

/// A read-only connection, one read at a time.
struct Reader {
    /// Held for the whole of a read, from before its thread starts.
    gate: Arc<tokio::sync::Semaphore>,
    interrupt: Arc<rusqlite::InterruptHandle>,
    db: Arc<Mutex<Option<Db>>>,
}

impl Reader {
    fn new(db: Db) -> Self {
        Self {
            gate: Arc::new(tokio::sync::Semaphore::new(1)),
            interrupt: Arc::new(db.conn.get_interrupt_handle()),
            db: Arc::new(Mutex::new(Some(db))),
        }
    }
}

struct Opened {
    writer: Db,
    reader: Db,
    operator: Db,
    /// Its connection, and the writer's requests.
    checkpointer: (Db, Receiver<()>),
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
    let mut writer = connect()?;
    let (checkpoint, asked) = mpsc::sync_channel(1);
    watch_wal(&mut writer, checkpoint).map_err(|e| store_error(&e))?;
    writer
        .conn
        .execute_batch(&format!("PRAGMA cache_size = -{WRITER_CACHE_KIB}"))
        .map_err(|e| store_error(&e))?;
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
    let operator = connect()?;
    let checkpointer = connect()?;
    Ok(Opened {
        writer,
        reader,
        operator,
        checkpointer: (checkpointer, asked),
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
    // secure_delete FAST: what a write frees inside a page it writes anyway
    // is zeroed (no more I/O), so moved and updated rows leave no stale
    // copies beside the live ones; a user's erase turns it fully on.
    db.conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA analysis_limit = {ANALYSIS_LIMIT}; \
         PRAGMA secure_delete = FAST",
        options.synchronous.as_str()
    ))
}

/// The writer's page cache, KiB (SQLite's default is 2 MiB). Every stored
/// call goes into indexes at random places (its messageId's, its user's),
/// and a page not in the cache is read again from the operating system's
/// for each of them: with a cache of the indexes' size the writer's
/// descents stay in memory. Pages are taken as they are used, so an idle
/// relay holds none of it.
const WRITER_CACHE_KIB: u32 = 64 * 1024;

/// SQLite's own checkpoint threshold (`wal_autocheckpoint`'s default,
/// pages): the hook below takes the place of the automatic checkpoint, so
/// the log is copied back at the same size.
const WAL_CHECKPOINT_PAGES: i32 = 1000;

/// Counts what each commit of the writer appends to the write-ahead log
/// (`callpost_relay_sqlite_wal_bytes_total`: the bytes an insert really
/// costs, index pages included), and once the log holds
/// [`WAL_CHECKPOINT_PAGES`] asks the checkpointer (`checkpoints`) to copy
/// it back into the database file. SQLite's automatic checkpoint, which a
/// hook of our own replaces, ran in the committing thread: the writer
/// then spent its time copying pages and waiting for the database file's
/// fsync instead of committing calls. The count is the growth of the log
/// since the last commit, or its whole size when a checkpoint let it
/// start again from the beginning.
fn watch_wal(db: &mut Db, checkpoint: mpsc::SyncSender<()>) -> rusqlite::Result<()> {
    let page: i64 = db.conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    // A frame: a page and its 24-byte header (sqlite.org/fileformat.html).
    let frame = u64::try_from(page).unwrap_or(4096) + 24;
    let shared = db.shared.clone();
    let mut before: i32 = 0;
    db.conn
        .wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: i32| {
            let appended = if pages >= before {
                pages - before
            } else {
                pages
            };
            before = pages;
            shared.wal_bytes.fetch_add(
                u64::try_from(appended).unwrap_or(0) * frame,
                Ordering::Relaxed,
            );
            if pages >= WAL_CHECKPOINT_PAGES {
                // Full: a request is already waiting, which is the same.
                let _ = checkpoint.try_send(());
            }
            Ok(())
        }))
}

/// The checkpointer: a connection of its own that copies the log back
/// into the database file when the writer asks (passive: it never waits
/// for the writer or a reader, and what it cannot copy now the next one
/// does). It ends when the writer's connection, which holds the only
/// sender, closes.
fn checkpoints(db: &Db, asked: &Receiver<()>) {
    while asked.recv().is_ok() {
        db.tick(1);
        if let Err(e) = db.conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
            // The writer goes on; the log grows until the next one works.
            tracing::warn!("a checkpoint of the SQLite log failed: {}", store_error(&e));
        }
    }
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

/// `meta.numbering` of a database whose migrations are numbered as
/// `store::MIGRATIONS` numbers them (the same on both databases).
const NUMBERING: &str = "shared";

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
        let recorded = match stored {
            None => 0,
            Some(v) => v.trim().parse::<i64>().map_err(|_| {
                StoreError::Refused(format!(
                    "the database's schema_version is not a number: {v:?}"
                ))
            })?,
        };
        let named: Option<String> = db
            .query_one("SELECT value FROM meta WHERE key = 'numbering'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| store_error(&e))?;
        // Relays before the migrations were numbered alike on both
        // databases had no SQLite migration 3 (`0003_senders`, which
        // Postgres has): their 3 to 7 are 4 to 8 now.
        let before = if named.is_none() && recorded >= 3 {
            recorded + 1
        } else {
            recorded
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
        for (key, value) in [
            ("schema_version", latest.to_string()),
            ("numbering", NUMBERING.into()),
        ] {
            db.exec(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key.to_owned(), value],
            )
            .map_err(|e| store_error(&e))?;
        }
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
    let mut sql = String::with_capacity(250 + n * 20);
    sql.push_str(
        "INSERT INTO deliveries \
         (source, message_id, destination, kind, message, received_at, status, due_at, \
         finished_at, user_id, anonymous_id, event, trace_parent) VALUES ",
    );
    for i in 0..n {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str("(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    }
    sql.push_str(" ON CONFLICT (message_id, source, destination) DO NOTHING");
    if returning {
        sql.push_str(" RETURNING source, message_id, destination");
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
    // (source, messageId, destination) → the insert that carried it first,
    // and whether the row counts its call.
    let mut owner: HashMap<(&str, &str, &str), (usize, bool)> = HashMap::new();
    let mut rows: Vec<(&Row, usize)> = Vec::new();
    for (i, (part, _, _)) in parts.iter().enumerate() {
        for r in *part {
            if let Entry::Vacant(e) = owner.entry((&r.source, &r.message_id, &r.destination)) {
                e.insert((i, r.first));
                rows.push((r, i));
            }
        }
    }
    for chunk in rows.chunks(INSERT_CHUNK) {
        // Rows come in their inserts' order: a chunk whose first and last
        // rows are one insert's, each row a call of its own, is that
        // insert's alone, and the count of rows changed is its count.
        // Otherwise the new rows are named, and each call's first row
        // counts for the insert that carried it first.
        let alone = match (chunk.first(), chunk.last()) {
            (Some(first), Some(last))
                if first.1 == last.1 && chunk.iter().all(|(r, _)| r.first) =>
            {
                Some(first.1)
            }
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
            stmt.raw_bind_parameter(i + 3, &r.destination)?;
            stmt.raw_bind_parameter(i + 4, r.kind)?;
            stmt.raw_bind_parameter(i + 5, &r.message)?;
            stmt.raw_bind_parameter(i + 6, r.received_at)?;
            stmt.raw_bind_parameter(i + 7, r.status.as_i64())?;
            stmt.raw_bind_parameter(i + 8, r.received_at)?;
            stmt.raw_bind_parameter(i + 9, finished_at)?;
            stmt.raw_bind_parameter(i + 10, &r.user_id)?;
            stmt.raw_bind_parameter(i + 11, &r.anonymous_id)?;
            stmt.raw_bind_parameter(i + 12, &r.event)?;
            stmt.raw_bind_parameter(i + 13, trace_parent)?;
            i += 13;
        }
        db.tick(1);
        if let Some(only) = alone {
            new[only] += stmt.raw_execute()?;
        } else {
            let mut stored = stmt.raw_query();
            while let Some(r) = stored.next()? {
                let key = (
                    r.get_ref(0)?.as_str()?,
                    r.get_ref(1)?.as_str()?,
                    r.get_ref(2)?.as_str()?,
                );
                if let Some(&(i, true)) = owner.get(&key) {
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

// -- statements ------------------------------------------------------------

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Self::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Self::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Self::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            // A list is one JSON array, read by `json_each`
            // (`Dialect::in_list`). Strings and integers always serialise.
            Self::Texts(l) => ToSqlOutput::from(serde_json::to_string(l).unwrap_or_default()),
            Self::Ints(l) => ToSqlOutput::from(serde_json::to_string(l).unwrap_or_default()),
        })
    }
}

/// A row of SQLite's, as [`Cells`].
fn cells(r: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Cells> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(match r.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Real(f) => Value::Text(f.to_string()),
            ValueRef::Blob(b) => Value::Text(String::from_utf8_lossy(b).into_owned()),
        });
    }
    Ok(Cells(out))
}

/// Runs `stmt`: its rows when it returns any (a `SELECT`, a `RETURNING`),
/// else the rows it changed.
fn run(db: &Db, stmt: &Stmt) -> rusqlite::Result<Written> {
    let mut prepared = db.conn.prepare_cached(&stmt.sql)?;
    db.tick(1);
    let columns = prepared.column_count();
    if columns == 0 {
        let count = prepared.execute(rusqlite::params_from_iter(&stmt.values))?;
        return Ok(Written {
            count: count as u64,
            rows: Vec::new(),
        });
    }
    let rows = prepared
        .query_map(rusqlite::params_from_iter(&stmt.values), |r| {
            cells(r, columns)
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Written {
        count: rows.len() as u64,
        rows,
    })
}

fn run_all(db: &Db, stmts: &[Stmt]) -> rusqlite::Result<Vec<Written>> {
    stmts.iter().map(|s| run(db, s)).collect()
}

/// The claimed rows that ended one way, as one JSON array of arrays for
/// `json_each`: one statement per kind of end, however many rows.
fn finish_rows(db: &Db, items: &[Finish], now: i64) -> rusqlite::Result<usize> {
    let mut delivered = Vec::new();
    let mut retry = Vec::new();
    let mut dead = Vec::new();
    let mut undeliverable = Vec::new();
    let mut filtered = Vec::new();
    let mut release = Vec::new();
    let mut forget = Vec::new();
    for f in items {
        match f {
            Finish::Delivered {
                id,
                claim,
                attempts,
                outcome,
                batch,
            } => delivered.push(serde_json::json!([id, claim, attempts, outcome, batch])),
            Finish::Retry {
                id,
                claim,
                attempts,
                state,
                due_at,
                batch,
            } => retry.push(serde_json::json!([
                id, claim, attempts, state, due_at, batch
            ])),
            Finish::Dead {
                id,
                claim,
                attempts,
                state,
                outcome,
                batch,
            } => dead.push(serde_json::json!([
                id, claim, attempts, state, outcome, batch
            ])),
            Finish::Undeliverable { id, claim, outcome } => {
                undeliverable.push(serde_json::json!([id, claim, outcome]));
            }
            Finish::Filtered { id, claim, outcome } => {
                filtered.push(serde_json::json!([id, claim, outcome]));
            }
            Finish::Release { id, claim } => release.push(serde_json::json!([id, claim])),
            Finish::Forget { id, claim } => forget.push(serde_json::json!([id, claim])),
        }
    }
    // Each row found by its primary key and counted only while it holds
    // the claim; `->>` reads an element of the row's array.
    let kinds: [(&[serde_json::Value], &str); 6] = [
        (
            &delivered,
            "status = 1, finished_at = ?1, attempts = j.value ->> 2, outcome = j.value ->> 3, \
             state = NULL, batch = j.value ->> 4",
        ),
        (
            &retry,
            "attempts = j.value ->> 2, state = j.value ->> 3, due_at = j.value ->> 4, \
             batch = j.value ->> 5",
        ),
        (
            &dead,
            "status = 2, finished_at = ?1, attempts = j.value ->> 2, state = j.value ->> 3, \
             outcome = j.value ->> 4, batch = j.value ->> 5",
        ),
        (
            &undeliverable,
            "status = 3, finished_at = ?1, outcome = j.value ->> 2",
        ),
        (
            &filtered,
            "status = 4, finished_at = ?1, outcome = j.value ->> 2, state = NULL",
        ),
        (&release, "status = status"),
    ];
    let mut changed = 0;
    for (rows, set) in kinds {
        if rows.is_empty() {
            continue;
        }
        let sql = format!(
            "UPDATE deliveries SET {set}, lease_until = NULL, claim = NULL \
             FROM json_each(?2) AS j \
             WHERE deliveries.id = j.value ->> 0 AND deliveries.claim = j.value ->> 1"
        );
        let json = serde_json::to_string(rows).unwrap_or_default();
        let mut stmt = db.conn.prepare_cached(&sql)?;
        db.tick(1);
        changed += stmt.execute(params![now, json])?;
    }
    if !forget.is_empty() {
        let json = serde_json::to_string(&forget).unwrap_or_default();
        let mut stmt = db.conn.prepare_cached(
            "DELETE FROM deliveries WHERE id IN (SELECT d.id FROM deliveries d, json_each(?1) AS j \
             WHERE d.id = j.value ->> 0 AND d.claim = j.value ->> 1)",
        )?;
        db.tick(1);
        changed += stmt.execute(params![json])?;
    }
    Ok(items.len().saturating_sub(changed))
}

#[async_trait]
impl Engine for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn migrated(&self) -> (i64, i64) {
        self.migrated
    }

    fn backlog(&self) -> usize {
        self.shared.backlog.load(Ordering::Acquire)
    }

    fn healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Acquire)
    }

    fn statements(&self) -> u64 {
        self.shared.statements.load(Ordering::Relaxed)
    }

    fn wal_bytes(&self) -> Option<u64> {
        Some(self.shared.wal_bytes.load(Ordering::Relaxed))
    }

    fn shared(&self) -> bool {
        false
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        *lock(&self.shared.observer) = Some(observer);
    }

    async fn read(&self, kind: Read, stmts: Vec<Stmt>) -> Result<Vec<Vec<Cells>>, StoreError> {
        self.read_with(kind, move |db| {
            stmts.iter().map(|s| run(db, s).map(|w| w.rows)).collect()
        })
        .await
    }

    async fn aside(&self, stmt: Stmt) -> Result<Written, StoreError> {
        // One file, one writer: a statement that changes a row goes
        // through it; a read goes to the reader.
        if stmt.sql.trim_start().starts_with("SELECT") {
            let rows = self
                .read_with(Read::Relay, move |db| run(db, &stmt))
                .await?;
            Ok(rows)
        } else {
            self.write_with(0, move |db| run(db, &stmt)).await
        }
    }

    async fn write(&self, stmts: Vec<Stmt>) -> Result<Vec<Written>, StoreError> {
        self.write_with(0, move |db| run_all(db, &stmts)).await
    }

    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        let calls = rows.len() + rejected.len();
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

    async fn write_if(&self, guard: Stmt, then: Then) -> Result<Option<Vec<Written>>, StoreError> {
        let calls = match &then {
            Then::Insert(rows) => rows.len(),
            Then::Statements(_) => 0,
        };
        self.write_with(calls, move |db| {
            if run(db, &guard)?.count == 0 {
                return Ok(None);
            }
            Ok(Some(match &then {
                Then::Insert(rows) => vec![Written {
                    count: store_calls(db, &[(rows, &[], None)])?
                        .first()
                        .map_or(0, |n| *n as u64),
                    rows: Vec::new(),
                }],
                Then::Statements(stmts) => run_all(db, stmts)?,
            }))
        })
        .await
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        self.write_with(0, move |db| finish_rows(db, &items, now))
            .await
    }

    async fn after_purge(&self) -> Result<(), StoreError> {
        self.write_with(0, optimize).await
    }

    async fn erasing(&self, on: bool) -> Result<(), StoreError> {
        self.write_with(0, move |db| {
            db.tick(1);
            db.conn.execute_batch(if on {
                "PRAGMA secure_delete = ON"
            } else {
                "PRAGMA secure_delete = FAST"
            })
        })
        .await
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
        let checkpointer = lock(&self.checkpointer).take();
        if let Some(checkpointer) = checkpointer {
            let _ = tokio::task::spawn_blocking(move || checkpointer.join()).await;
        }
        for reader in [&self.reader, &self.operator] {
            reader.gate.close();
        }
        let readers = [self.reader.db.clone(), self.operator.db.clone()];
        let _ = tokio::task::spawn_blocking(move || {
            for reader in readers {
                drop(lock(&reader).take());
            }
        })
        .await;
        if let Some(file) = lock(&self.lock_file).take() {
            let _ = file.unlock();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A store in `dir` whose calls wait 300 ms at most.
    async fn short_limit(dir: &tempfile::TempDir) -> Sqlite {
        let options = StoreOptions {
            synchronous: Synchronous::Normal,
            timeout: Duration::from_millis(300),
            exclusive: true,
            ca_file: None,
        };
        Sqlite::open(dir.path().join("relay.db"), options)
            .await
            .unwrap()
    }

    fn select_one() -> Stmt {
        Stmt {
            sql: "SELECT 1".into(),
            values: vec![],
        }
    }

    /// A search by messageId reads the deduplication key, which starts with
    /// it, and no call is written to a separate index of message ids (each
    /// index at a random key costs a stored call a page of the WAL).
    #[tokio::test]
    async fn a_message_id_search_reads_the_deduplication_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = short_limit(&dir).await;
        store.close().await;
        let conn = Connection::open(dir.path().join("relay.db")).unwrap();
        let indexes: Vec<String> = conn
            .prepare("SELECT name FROM pragma_index_list('deliveries')")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            !indexes.iter().any(|n| n == "deliveries_message"),
            "{indexes:?}"
        );
        let filter = LogFilter {
            message_ids: Some(vec!["m1".into()]),
            ..LogFilter::default()
        };
        let stmt = sql::search(Dialect::Sqlite, &filter, None, 10);
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", stmt.sql))
            .unwrap();
        let steps: Vec<String> = plan
            .query_map(rusqlite::params_from_iter(&stmt.values), |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            steps
                .iter()
                .any(|s| s.contains("sqlite_autoindex_deliveries_1 (message_id=?)")),
            "{steps:?}"
        );
    }

    /// An operator's slow read (a search of a large log) holds neither the
    /// relay's own reads nor its writes back, and does not make the store
    /// unhealthy: here the operators' connection is held, as a long search
    /// holds it. Before, every read shared one connection, and a read past
    /// the time limit took readiness down with it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_operator_read_holds_nothing_else_back() {
        let dir = tempfile::tempdir().unwrap();
        let engine = short_limit(&dir).await;
        // An operator's search still running.
        let search = engine.operator.gate.clone().acquire_owned().await.unwrap();
        let e = engine
            .read(Read::Operator, vec![select_one()])
            .await
            .unwrap_err();
        assert_eq!(e, StoreError::Timeout);
        assert!(
            engine.healthy(),
            "an operator's read says nothing of ingest"
        );
        engine.read(Read::Relay, vec![select_one()]).await.unwrap();
        let row = Row {
            source: "a".into(),
            message_id: "m".into(),
            destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
            first: true,
            kind: "track",
            message: "{}".into(),
            received_at: 1,
            status: Status::Pending,
            user_id: None,
            anonymous_id: None,
            event: None,
        };
        assert_eq!(engine.insert(vec![row], vec![], None).await.unwrap(), 1);
        assert!(engine.healthy());
        drop(search);
        engine
            .read(Read::Operator, vec![select_one()])
            .await
            .unwrap();
        engine.close().await;
    }

    /// A read past the time limit is interrupted, so the connection serves
    /// the next read at once rather than after the slow statement ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_past_the_limit_is_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let engine = short_limit(&dir).await;
        // Minutes of work for SQLite.
        let slow = Stmt {
            sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
                  SELECT count(*) FROM n WHERE i < 0"
                .into(),
            values: vec![],
        };
        let e = engine.read(Read::Operator, vec![slow]).await.unwrap_err();
        assert_eq!(e, StoreError::Timeout);
        engine
            .read(Read::Operator, vec![select_one()])
            .await
            .unwrap();
        engine.close().await;
    }
}

//! The store for several relays on one Postgres database.
//!
//! The same tables and the same life for a call as on SQLite: writes queue
//! up and go in together (group commit), the calls of every request in the
//! group by one `INSERT … SELECT FROM unnest(…)` whatever their number,
//! deduplicated by a unique constraint that holds across relays; a group
//! that is one statement (single-call requests, a claim, a finish) runs it
//! as its own transaction, with no BEGIN or COMMIT; one claim for many
//! (`FOR UPDATE SKIP LOCKED`, so relays never wait for each other's rows);
//! one finish for many (an `UPDATE … FROM unnest(…)` checking each claim
//! token, so a worker that outlived its lease cannot overwrite the result
//! of the worker that took over).
//!
//! Leases are renewed while a round runs: a relay that dies has its
//! deliveries taken over by the others when the lease ends, and a new relay
//! takes nothing from live ones. Relays on one database need clocks in step
//! (NTP), as every lease-based queue does.
//!
//! While Postgres is down, writes fail fast ([`StoreError::Unavailable`]);
//! while it is stuck, every call ends at [`StoreOptions::timeout`]
//! ([`StoreError::Timeout`]). Either way the store reports itself unhealthy
//! until a call succeeds, and the pool opens new connections once the
//! database answers again.
//!
//! TLS follows the URL's `sslmode` (disable, prefer, require); certificates are
//! verified, chain and host name, against the system's roots plus
//! [`StoreOptions::ca_file`].

use super::engine::{Engine, Read, SqlStore, Then, Written};
use super::sql::{Cells, Dialect, Stmt, Value};
use super::*;
use deadpool_postgres::{
    Connect, GenericClient, HookError, Manager, ManagerConfig, Object, Pool, PoolError,
    RecyclingMethod, Runtime,
};
use std::collections::hash_map::{Entry, HashMap};
use std::future::Future;
use std::ops::Range;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;
use tokio_postgres::config::SslMode;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::NoTls;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Connections per relay: the writers' transactions, plus room for claims'
/// readers, status queries and the CLI.
const POOL_SIZE: usize = 8;
/// Transactions in flight at once from one relay. One at a time holds
/// ingest to one round trip and one WAL flush per group (measured: 5,400
/// calls/s on the benchmark's machine); Postgres flushes concurrent
/// commits together, and 4 gave twice that, within the pool's 8
/// connections.
const WRITERS: usize = 4;
/// How long opening a connection may take (libpq's `connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadlock detected, serialization failure: the transaction runs again,
/// whole, up to this many times in all.
const CONFLICTS: [&str; 2] = ["40P01", "40001"];
const CONFLICT_TRIES: u32 = 5;
/// SQLSTATE read_only_sql_transaction: a write on a server that only reads.
const READ_ONLY: &str = "25006";
/// Any fixed number ("callpost" in ASCII): the key of the advisory lock
/// that lets one relay at a time run the migrations.
const MIGRATION_LOCK: i64 = 0x6361_6C6C_706F_7374;
/// A migration may build an index over a large table: it is not held to
/// the per-call limit, only to this.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(600);

/// A group's calls go in by one statement, each column as one array
/// parameter. Parameters travel in binary, each text as its length and its
/// bytes: no quoting or parsing of the calls' JSON (what makes text array
/// literals slow), so the server does about the work of a binary COPY into
/// a staging table and a move, in one statement and one round trip instead
/// of two statements and several round trips. Measured on a 2-core machine
/// like the benchmark's: 640 calls of 0.4-4 KB in 16-31 ms either way;
/// 2,000 groups of 3 calls, one after the other, in 1.9 s against 4.8 s.
/// RETURNING names the new rows, so that each request of the group gets
/// its own count.
const INSERT_CALLS: &str = "INSERT INTO deliveries (source, message_id, kind, message, \
     received_at, status, due_at, finished_at, user_id, anonymous_id, event, trace_parent, \
     destination) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
     $6::smallint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], \
     $12::text[], $13::text[]) \
     ON CONFLICT (message_id, source, destination) DO NOTHING \
     RETURNING source, message_id, destination";
/// [`INSERT_CALLS`] with the group's refused calls, in the same statement.
const INSERT_CALLS_AND_REJECTED: &str = "WITH refused AS (INSERT INTO rejected \
     (source, received_at, code, reason, text) \
     SELECT * FROM unnest($14::text[], $15::bigint[], $16::text[], $17::text[], $18::text[])) \
     INSERT INTO deliveries (source, message_id, kind, message, \
     received_at, status, due_at, finished_at, user_id, anonymous_id, event, trace_parent, \
     destination) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
     $6::smallint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], \
     $12::text[], $13::text[]) \
     ON CONFLICT (message_id, source, destination) DO NOTHING \
     RETURNING source, message_id, destination";
/// Bytes of calls one statement carries: past it, a group's calls take
/// several statements (in one transaction). Far below the 1 GB Postgres
/// takes in one message, and a bounded buffer on each side.
const STATEMENT_BYTES: usize = 16 << 20;
const INSERT_REJECTED: &str = "INSERT INTO rejected (source, received_at, code, reason, text) \
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[])";
const FINISH_DELIVERED: &str = "UPDATE deliveries d SET status = 1, finished_at = $1, \
     attempts = f.attempts, outcome = f.outcome, state = NULL, batch = f.batch, \
     lease_until = NULL, claim = NULL \
     FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::text[], $6::text[]) \
     AS f(id, claim, attempts, outcome, batch) \
     WHERE d.id = f.id AND d.claim = f.claim";
const FINISH_RETRY: &str = "UPDATE deliveries d SET state = f.state, due_at = f.due_at, \
     attempts = f.attempts, batch = f.batch, lease_until = NULL, claim = NULL \
     FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::bigint[], $6::text[]) \
     AS f(id, claim, attempts, state, due_at, batch) WHERE d.id = f.id AND d.claim = f.claim";
const FINISH_DEAD: &str = "UPDATE deliveries d SET status = 2, state = f.state, \
     outcome = f.outcome, finished_at = $1, attempts = f.attempts, batch = f.batch, \
     lease_until = NULL, claim = NULL \
     FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[]) \
     AS f(id, claim, attempts, state, outcome, batch) WHERE d.id = f.id AND d.claim = f.claim";
/// The rows that ended never sent (undeliverable, filtered), `{status}`
/// written as a number (`store::sql`'s convention).
const FINISH_UNSENT: &str = "UPDATE deliveries d SET status = {status}, outcome = f.outcome, \
     finished_at = $1, state = NULL, lease_until = NULL, claim = NULL \
     FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS f(id, claim, outcome) \
     WHERE d.id = f.id AND d.claim = f.claim";
const FINISH_FORGET: &str = "DELETE FROM deliveries d \
     USING unnest($1::bigint[], $2::bigint[]) AS f(id, claim) \
     WHERE d.id = f.id AND d.claim = f.claim";

const FINISH_RELEASE: &str = "UPDATE deliveries d SET lease_until = NULL, claim = NULL \
     FROM unnest($1::bigint[], $2::bigint[]) AS f(id, claim) \
     WHERE d.id = f.id AND d.claim = f.claim";

/// Connects to the database `url` names and runs its migrations, under an
/// advisory lock (relays starting together take turns; the first
/// migrates, the others find the schema current).
pub async fn open(url: &str, options: StoreOptions) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(SqlStore::new(Postgres::open(url, options).await?)))
}

/// Several relays, one outbox (see the module docs).
pub(crate) struct Postgres {
    inner: Arc<Inner>,
    queue: Mutex<Option<mpsc::UnboundedSender<Op>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// What the callers and the writer's transactions share.
struct Inner {
    pool: Pool,
    timeout: Duration,
    migrated: (i64, i64),
    healthy: AtomicBool,
    backlog: AtomicUsize,
    statements: Arc<AtomicU64>,
    conflicts: AtomicU64,
    observer: RwLock<Option<CommitObserver>>,
    /// The URL and its password: never in an error message.
    secrets: Vec<String>,
}

/// The database URL and password stay out of it.
impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.inner.pool.status();
        f.debug_struct("Postgres")
            .field("connections", &status.size)
            .field("timeout", &self.inner.timeout)
            .field("migrated", &self.inner.migrated)
            .field("healthy", &self.inner.healthy.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Connects, and runs the migrations under an advisory lock.
    async fn open(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        let mut secrets = vec![url.to_owned()];
        let mut pg: tokio_postgres::Config =
            verified_modes_as_require(url).parse().map_err(|_| {
                StoreError::Refused(if has_unknown_sslmode(url) {
                    "the database URL's sslmode must be disable, prefer, require, \
                     verify-ca or verify-full"
                        .into()
                } else {
                    "the database URL is not a Postgres URL that can be parsed".into()
                })
            })?;
        if let Some(password) = pg.get_password() {
            if let Ok(p) = std::str::from_utf8(password) {
                if !p.is_empty() {
                    secrets.push(p.to_owned());
                }
            }
        }
        pg.connect_timeout(CONNECT_TIMEOUT);
        if pg.get_application_name().is_none() {
            pg.application_name("callpost-relay");
        }
        let statements = Arc::new(AtomicU64::new(0));
        // The server ends a statement a little after the relay has given up
        // on it: the caller sees the relay's own Timeout, and whatever a
        // stuck call left running on the server does not run on.
        let server_ms = options.timeout.as_millis() + options.timeout.as_millis() / 10 + 100;
        let setup = format!("SET statement_timeout = {server_ms}");
        let counter = statements.clone();
        let connect = Connector::new(pg.get_ssl_mode(), options.ca_file.as_deref())?;
        let manager = Manager::from_connect(
            pg,
            connect,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.timeout))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .post_create(deadpool_postgres::Hook::async_fn(move |client, _| {
                let setup = setup.clone();
                let counter = counter.clone();
                Box::pin(async move {
                    counter.fetch_add(1, Ordering::Relaxed);
                    client
                        .batch_execute(&setup)
                        .await
                        .map_err(HookError::Backend)
                })
            }))
            .build()
            .map_err(|e| StoreError::Refused(format!("the Postgres pool: {e}")))?;
        let mut inner = Inner {
            pool,
            timeout: options.timeout,
            migrated: (0, 0),
            healthy: AtomicBool::new(true),
            backlog: AtomicUsize::new(0),
            statements,
            conflicts: AtomicU64::new(0),
            observer: RwLock::new(None),
            secrets,
        };
        inner.migrated = match tokio::time::timeout(MIGRATION_TIMEOUT, inner.migrate()).await {
            Ok(result) => result?,
            Err(_) => return Err(StoreError::Timeout),
        };
        let inner = Arc::new(inner);
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_loop(inner.clone(), rx));
        Ok(Self {
            inner,
            queue: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Queues a write for the next transaction and waits for its commit,
    /// at most the store's timeout.
    async fn write(&self, work: Work, calls: usize) -> Result<Done, StoreError> {
        let (reply, answer) = oneshot::channel();
        {
            let queue = self.queue.lock().map_err(|_| StoreError::Closed)?;
            let Some(queue) = queue.as_ref() else {
                return Err(StoreError::Closed);
            };
            self.inner.backlog.fetch_add(calls, Ordering::Relaxed);
            if queue.send(Op { work, calls, reply }).is_err() {
                self.inner.backlog.fetch_sub(calls, Ordering::Relaxed);
                return Err(StoreError::Closed);
            }
        }
        match tokio::time::timeout(self.inner.timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => {
                self.inner.set_unhealthy("a write did not commit in time");
                Err(StoreError::Timeout)
            }
        }
    }
}

/// A write waiting for its transaction.
struct Op {
    work: Work,
    /// Calls it stores (the backlog's unit).
    calls: usize,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// What a write does. Held by reference while its transaction runs, so a
/// transaction aborted by a conflict can run again whole.
enum Work {
    /// Calls and refused calls (merged with the group's other inserts).
    Insert {
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    },
    /// Statements, in order.
    Statements(Vec<Stmt>),
    /// A statement, then, if it changed a row, the rest (a write over a
    /// state or version it read).
    If { guard: Stmt, then: Then },
    /// How claimed rows ended.
    Finish { items: Vec<Finish>, now: i64 },
}

/// A write's result.
enum Done {
    /// New calls, or rows refused (a finish).
    Count(u64),
    /// Each statement's result.
    Written(Vec<Written>),
    /// A [`Work::If`] whose guard changed nothing: nothing was written.
    Conflict,
}

impl Done {
    fn count(&self) -> u64 {
        match self {
            Self::Count(n) => *n,
            Self::Written(w) => w.iter().map(|w| w.count).sum(),
            Self::Conflict => 0,
        }
    }
}

/// Why a transaction or a read did not complete.
enum Failure {
    /// Past the store's timeout.
    Timeout,
    /// The pool is closed.
    Closed,
    /// From the driver or the server, while running the work.
    Pg(tokio_postgres::Error),
    /// From the driver or the server, while opening a connection (refused,
    /// authentication, no such database): never the work's fault.
    Connect(tokio_postgres::Error),
    /// From the pool, before any connection.
    Pool(String),
}

impl Failure {
    /// The server refused this work for its content (bad data, a limit):
    /// the database itself is fine, and the other writes of a group may
    /// well commit without it.
    fn is_refusal(&self) -> bool {
        let Self::Pg(e) = self else { return false };
        let Some(db) = e.as_db_error() else {
            return false;
        };
        let code = db.code().code();
        // 08 connection, 53 resources, 57 operator intervention (shutdown,
        // cancel, statement timeout), 58 system, XX internal, and a server
        // that only reads: the database is at fault, not the write.
        code != READ_ONLY
            && !["08", "53", "57", "58", "XX"]
                .iter()
                .any(|class| code.starts_with(class))
    }

    /// The connection is to a server that no longer takes writes: a
    /// primary demoted by a failover (Patroni, pg_auto_failover, a managed
    /// database's switchover) that kept its sessions.
    fn is_read_only(&self) -> bool {
        matches!(self, Self::Pg(e) if e.code().is_some_and(|c| c.code() == READ_ONLY))
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Self::Pg(e) if e.code().is_some_and(|c| CONFLICTS.contains(&c.code())))
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<PoolError> for Failure {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Timeout(_) => Self::Timeout,
            PoolError::Closed => Self::Closed,
            PoolError::Backend(e) => Self::Connect(e),
            PoolError::PostCreateHook(HookError::Backend(e)) => Self::Connect(e),
            other => Self::Pool(other.to_string()),
        }
    }
}

/// `url` with libpq's `sslmode=verify-ca` and `sslmode=verify-full`, which
/// the driver does not know, as `require`: the relay verifies the server's
/// certificate chain and host name whenever it uses TLS, which is what
/// `verify-full` asks for (and more than `verify-ca`).
fn verified_modes_as_require(url: &str) -> std::borrow::Cow<'_, str> {
    let Some((base, query)) = url.split_once('?') else {
        return url.into();
    };
    let mut changed = false;
    let params: Vec<&str> = query
        .split('&')
        .map(|param| match param {
            "sslmode=verify-ca" | "sslmode=verify-full" => {
                changed = true;
                "sslmode=require"
            }
            other => other,
        })
        .collect();
    if changed {
        format!("{base}?{}", params.join("&")).into()
    } else {
        url.into()
    }
}

/// The URL's query has an `sslmode` the relay does not take (libpq's
/// `allow`, a typo).
fn has_unknown_sslmode(url: &str) -> bool {
    let Some((_, query)) = url.split_once('?') else {
        return false;
    };
    query.split('&').any(|param| {
        param.strip_prefix("sslmode=").is_some_and(|mode| {
            !matches!(
                mode,
                "disable" | "prefer" | "require" | "verify-ca" | "verify-full"
            )
        })
    })
}

/// Opens the pool's connections as the URL's `sslmode` says: `disable`,
/// no TLS; `require`, TLS with a verified certificate or no connection;
/// `prefer`, TLS when the server offers it, and when the handshake fails
/// (the server's certificate does not verify) a new connection without
/// TLS, as libpq's `prefer` does.
struct Connector {
    tls: MakeRustlsConnect,
    mode: SslMode,
    /// The fallback of `prefer` has been logged (once per store).
    warned: AtomicBool,
}

impl Connector {
    fn new(mode: SslMode, ca_file: Option<&Path>) -> Result<Self, StoreError> {
        // `disable` never reads the roots, so a bad `ca_file` is no reason
        // to refuse it.
        let roots = match mode {
            SslMode::Disable => rustls::RootCertStore::empty(),
            _ => crate::tls::roots(ca_file).map_err(|e| StoreError::Refused(e.to_string()))?,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::Refused(format!("TLS for Postgres: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            tls: MakeRustlsConnect::new(config),
            mode,
            warned: AtomicBool::new(false),
        })
    }
}

type Connected = (tokio_postgres::Client, JoinHandle<()>);

impl Connect for Connector {
    fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> Pin<Box<dyn Future<Output = Result<Connected, tokio_postgres::Error>> + Send + '_>> {
        let pg = pg.clone();
        Box::pin(async move {
            let (client, connection) = match pg.connect(self.tls.clone()).await {
                Ok((client, connection)) => (client, tokio::spawn(drive(connection))),
                Err(e) if self.mode == SslMode::Prefer && is_tls_failure(&e) => {
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "TLS to the database failed ({}): connecting without TLS, \
                             as sslmode=prefer allows (set sslmode=require to refuse, \
                             and ca_file to trust the server's CA)",
                            describe(&e)
                        );
                    }
                    let mut plain = pg.clone();
                    plain.ssl_mode(SslMode::Disable);
                    let (client, connection) = plain.connect(NoTls).await?;
                    (client, tokio::spawn(drive(connection)))
                }
                Err(e) => return Err(e),
            };
            Ok((client, connection))
        })
    }
}

/// Runs a connection until it ends; its error reaches the caller through
/// the client.
async fn drive<F: Future>(connection: F) {
    let _ = connection.await;
}

/// The TLS handshake failed (rustls said why), as opposed to the server
/// being unreachable or refusing the login.
fn is_tls_failure(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            {
                return true;
            }
        }
        source = cause.source();
    }
    false
}

/// The driver's words for an error, without anything that could carry the
/// connection string, and without the server's DETAIL (it quotes the
/// customer's values).
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn write_loop(inner: Arc<Inner>, mut queue: mpsc::UnboundedReceiver<Op>) {
    let slots = Arc::new(Semaphore::new(WRITERS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let Some(first) = queue.recv().await else {
            break;
        };
        // Whatever arrived while every writer was busy goes in one
        // transaction.
        let mut ops = vec![first];
        while let Ok(op) = queue.try_recv() {
            ops.push(op);
        }
        let inner = inner.clone();
        tokio::spawn(async move {
            inner.commit(ops).await;
            drop(slot);
        });
    }
    // Closing: the transactions in flight finish first.
    let _ = slots.acquire_many(WRITERS as u32).await;
}

impl Inner {
    fn count(&self, n: u64) {
        self.statements.fetch_add(n, Ordering::Relaxed);
    }

    fn redact(&self, mut text: String) -> String {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "***");
            }
        }
        text
    }

    fn set_unhealthy(&self, why: &str) {
        if self.healthy.swap(false, Ordering::AcqRel) {
            tracing::warn!("the database is not answering: {why}");
        }
    }

    /// The caller's error for a failure; the store turns unhealthy unless
    /// the server merely refused this one write.
    fn fail(&self, failure: &Failure) -> StoreError {
        let error = self.error_of(failure);
        if !failure.is_refusal() {
            self.set_unhealthy(&error.to_string());
        }
        error
    }

    /// The caller's error for a failure, the store's health left alone.
    fn error_of(&self, failure: &Failure) -> StoreError {
        match failure {
            Failure::Timeout => StoreError::Timeout,
            Failure::Closed => StoreError::Closed,
            Failure::Pg(e) if e.code().is_some_and(|c| c.code() == "57014") => StoreError::Timeout,
            Failure::Pg(e) | Failure::Connect(e) => {
                StoreError::Unavailable(self.redact(describe(e)))
            }
            Failure::Pool(m) => StoreError::Unavailable(self.redact(m.clone())),
        }
    }

    async fn migrate(&self) -> Result<(i64, i64), StoreError> {
        let latest = POSTGRES_MIGRATIONS.last().map_or(0, |m| m.0);
        let mut conn = self.pool.get().await.map_err(|e| self.fail(&e.into()))?;
        let result: Result<Result<i64, StoreError>, tokio_postgres::Error> = async {
            let tx = conn.transaction().await?;
            self.count(1);
            // An index build on a large table may take longer than a call.
            tx.batch_execute("SET LOCAL statement_timeout = 0").await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            )
            .await?;
            let row = tx
                .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])
                .await?;
            self.count(4);
            let before = match row {
                None => 0,
                Some(row) => match row.get::<_, String>(0).trim().parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => {
                        return Ok(Err(StoreError::Refused(
                            "the database's meta.schema_version is not a number".into(),
                        )))
                    }
                },
            };
            if before > latest {
                return Ok(Err(StoreError::Refused(format!(
                    "the database has schema version {before}, newer than this relay's {latest}"
                ))));
            }
            for (version, sql) in POSTGRES_MIGRATIONS {
                if *version > before {
                    tx.batch_execute(sql).await?;
                    self.count(1);
                    tracing::info!("ran the Postgres migration {version}");
                }
            }
            if before < latest {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', $1) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&latest.to_string()],
                )
                .await?;
                self.count(1);
            }
            tx.commit().await?;
            self.count(1);
            Ok(Ok(before))
        }
        .await;
        match result {
            Ok(Ok(before)) => Ok((before, latest.max(before))),
            Ok(Err(refused)) => Err(refused),
            Err(e) => Err(self.fail(&Failure::Pg(e))),
        }
    }

    /// Runs a group of writes in one transaction (again on a conflict),
    /// or, when the server refuses the group, each alone, so one bad write
    /// does not fail the others.
    async fn commit(&self, ops: Vec<Op>) {
        // A caller that gave up (its timeout) was told the write did not
        // happen: it does not.
        let (ops, gone): (Vec<Op>, Vec<Op>) = ops.into_iter().partition(|op| !op.reply.is_closed());
        for op in gone {
            self.settle(op, Err(StoreError::Timeout));
        }
        if ops.is_empty() {
            return;
        }
        match self.transact(&ops).await {
            Ok(results) => {
                for (op, result) in ops.into_iter().zip(results) {
                    self.settle(op, Ok(result));
                }
            }
            Err(failure) if ops.len() > 1 && failure.is_refusal() => {
                for op in ops {
                    if op.reply.is_closed() {
                        self.settle(op, Err(StoreError::Timeout));
                        continue;
                    }
                    let result = match self.transact(std::slice::from_ref(&op)).await {
                        Ok(mut results) => results.pop().ok_or(StoreError::Closed),
                        Err(failure) => Err(self.fail(&failure)),
                    };
                    self.settle(op, result);
                }
            }
            Err(failure) => {
                let error = self.fail(&failure);
                for op in ops {
                    self.settle(op, Err(error.clone()));
                }
            }
        }
    }

    fn settle(&self, op: Op, result: Result<Done, StoreError>) {
        self.backlog.fetch_sub(op.calls, Ordering::Relaxed);
        let _ = op.reply.send(result);
    }

    /// One transaction for the group, run again whole when the database
    /// aborts it for a deadlock or a serialization failure.
    async fn transact(&self, ops: &[Op]) -> Result<Vec<Done>, Failure> {
        let mut tries = 1;
        loop {
            let started = Instant::now();
            let deadline = tokio::time::Instant::now() + self.timeout;
            let result = match self.conn(deadline).await {
                Ok(mut conn) => {
                    let result =
                        tokio::time::timeout_at(deadline, self.run_group(&mut conn, ops)).await;
                    settled(conn, result)
                }
                Err(failure) => Err(failure),
            };
            match result {
                Ok(results) => {
                    self.healthy.store(true, Ordering::Release);
                    if let Ok(observer) = self.observer.read() {
                        if let Some(observer) = observer.as_ref() {
                            observer(started.elapsed(), ops.iter().map(|op| op.calls).sum());
                        }
                    }
                    return Ok(results);
                }
                Err(failure) if failure.is_conflict() && tries < CONFLICT_TRIES => {
                    // Transactions in flight together can deadlock (a finish
                    // and a renewal locking the same rows in another order;
                    // two requests resending the same calls). Postgres
                    // aborts one, and it runs again.
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                    tries += 1;
                    tracing::info!("a transaction was aborted by a conflict; it runs again");
                }
                Err(failure) => return Err(failure),
            }
        }
    }

    /// A pooled connection, before `deadline`.
    async fn conn(&self, deadline: tokio::time::Instant) -> Result<Object, Failure> {
        match tokio::time::timeout_at(deadline, self.pool.get()).await {
            Ok(conn) => Ok(conn?),
            Err(_) => Err(Failure::Timeout),
        }
    }
}

/// The result of work on `conn` that had a deadline. A connection whose
/// work ran out of time is closed rather than returned to the pool: it may
/// still be busy with what was cut off. So is one to a server that only
/// reads: the pool's next connection goes through the URL's hosts again
/// (`target_session_attrs=read-write` finds the new primary), where this
/// one would fail every write for as long as the demoted server keeps it.
fn settled<T>(
    conn: Object,
    result: Result<Result<T, tokio_postgres::Error>, tokio::time::error::Elapsed>,
) -> Result<T, Failure> {
    match result {
        Ok(r) => r.map_err(Failure::Pg).inspect_err(|failure| {
            if failure.is_read_only() {
                drop(Object::take(conn));
            }
        }),
        Err(_) => {
            drop(Object::take(conn));
            Err(Failure::Timeout)
        }
    }
}

type PgResult<T> = Result<T, tokio_postgres::Error>;

fn int4(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
}

/// The calls and refused calls of a group's inserts, each (source,
/// messageId) once: a call that an earlier insert of the group carries is
/// not new for the later one, as if they had run one after the other, and
/// only the first one's row is sent.
struct Calls<'a> {
    /// Each call, with the index of the operation it came with.
    rows: Vec<(&'a Row, usize)>,
    /// Each operation's trace context, by its index.
    traces: HashMap<usize, &'a str>,
    rejected: Vec<&'a RejectedRow>,
    /// Whose count a new row adds to: the first operation that carried
    /// it, if the row counts its call (the call's first row).
    owner: HashMap<(&'a str, &'a str, &'a str), (usize, bool)>,
}

impl<'a> Calls<'a> {
    /// The calls of `parts`: (operation index, calls, refused calls,
    /// trace context).
    fn new(
        parts: impl IntoIterator<Item = (usize, &'a [Row], &'a [RejectedRow], Option<&'a str>)>,
    ) -> Self {
        let mut calls = Self {
            rows: Vec::new(),
            traces: HashMap::new(),
            rejected: Vec::new(),
            owner: HashMap::new(),
        };
        for (i, rows, rejected, trace) in parts {
            if let Some(t) = trace {
                calls.traces.insert(i, t);
            }
            for r in rows {
                if let Entry::Vacant(e) =
                    calls
                        .owner
                        .entry((&r.source, &r.message_id, &r.destination))
                {
                    e.insert((i, r.first));
                    calls.rows.push((r, i));
                }
            }
            calls.rejected.extend(rejected);
        }
        calls
    }

    /// The group's inserts.
    fn of(ops: &'a [Op]) -> Self {
        Self::new(ops.iter().enumerate().filter_map(|(i, op)| match &op.work {
            Work::Insert {
                rows,
                rejected,
                trace_parent,
            } => Some((
                i,
                rows.as_slice(),
                rejected.as_slice(),
                trace_parent.as_deref(),
            )),
            _ => None,
        }))
    }

    /// The statements they take: which calls and refused calls each one
    /// carries.
    fn statements(&self) -> Vec<(Range<usize>, Range<usize>)> {
        let rows = spans(&self.rows, |(r, _)| {
            r.source.len()
                + r.message_id.len()
                + r.destination.len()
                + r.kind.len()
                + r.message.len()
        });
        let rejected = spans(&self.rejected, |r| {
            r.source.len() + r.code.len() + r.reason.len() + r.text.len()
        });
        (0..rows.len().max(rejected.len()))
            .map(|k| {
                (
                    rows.get(k).cloned().unwrap_or(0..0),
                    rejected.get(k).cloned().unwrap_or(0..0),
                )
            })
            .collect()
    }
}

/// `items` cut into runs of at most [`STATEMENT_BYTES`] (a longer item
/// alone).
fn spans<T>(items: &[T], bytes: impl Fn(&T) -> usize) -> Vec<Range<usize>> {
    // The fixed part of each row: its numbers and each value's length.
    const ROW_OVERHEAD: usize = 64;
    let mut spans = Vec::new();
    let (mut start, mut total) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let size = bytes(item) + ROW_OVERHEAD;
        if i > start && total + size > STATEMENT_BYTES {
            spans.push(start..i);
            start = i;
            total = 0;
        }
        total += size;
    }
    if start < items.len() {
        spans.push(start..items.len());
    }
    spans
}

impl Work {
    /// Whether it is one statement, which then needs no transaction of
    /// its own (inserts are counted with their group's calls).
    fn is_one_statement(&self) -> bool {
        match self {
            Self::Statements(stmts) => stmts.len() == 1,
            Self::Finish { items, .. } => {
                let kind = |f: &Finish| std::mem::discriminant(f);
                items
                    .first()
                    .is_some_and(|first| items.iter().all(|f| kind(f) == kind(first)))
            }
            Self::Insert { .. } | Self::If { .. } => false,
        }
    }
}

impl Inner {
    /// The group's work: first every insert's calls together (the writes
    /// of a group wait together, so any order of them is one their callers
    /// could have seen), then the other writes in the order they came. A
    /// group that is one statement runs it alone: Postgres makes a single
    /// statement a transaction of its own, and BEGIN and COMMIT would be
    /// two more statements and two more round trips.
    async fn run_group(&self, conn: &mut Object, ops: &[Op]) -> PgResult<Vec<Done>> {
        let calls = Calls::of(ops);
        let statements = calls.statements();
        let inserts = ops
            .iter()
            .filter(|op| matches!(op.work, Work::Insert { .. }))
            .count();
        let one_statement = match ops {
            [op] if inserts == 0 => op.work.is_one_statement(),
            _ => inserts == ops.len() && statements.len() <= 1,
        };
        if one_statement {
            let client: &Object = conn;
            return self.run_ops(client, ops, &calls, &statements).await;
        }
        let tx = conn.transaction().await?;
        self.count(1);
        let results = self.run_ops(&tx, ops, &calls, &statements).await?;
        tx.commit().await?;
        self.count(1);
        Ok(results)
    }

    async fn run_ops<C: GenericClient>(
        &self,
        c: &C,
        ops: &[Op],
        calls: &Calls<'_>,
        statements: &[(Range<usize>, Range<usize>)],
    ) -> PgResult<Vec<Done>> {
        let mut new = vec![0; ops.len()];
        self.store_calls(c, calls, statements, &mut new).await?;
        let mut results = Vec::with_capacity(ops.len());
        for (op, new) in ops.iter().zip(new) {
            results.push(match &op.work {
                Work::Insert { .. } => Done::Count(new),
                work => self.run(c, work).await?,
            });
        }
        Ok(results)
    }

    /// Stores `calls` by `statements`, adding each new row to its
    /// operation's count in `new`.
    async fn store_calls<C: GenericClient>(
        &self,
        c: &C,
        calls: &Calls<'_>,
        statements: &[(Range<usize>, Range<usize>)],
        new: &mut [u64],
    ) -> PgResult<()> {
        for (rows, rejected) in statements {
            let rows = &calls.rows[rows.clone()];
            let rejected = &calls.rejected[rejected.clone()];
            let sources: Vec<&str> = rejected.iter().map(|r| r.source.as_str()).collect();
            let received: Vec<i64> = rejected.iter().map(|r| r.received_at).collect();
            let codes: Vec<&str> = rejected.iter().map(|r| r.code).collect();
            let reasons: Vec<&str> = rejected.iter().map(|r| r.reason.as_str()).collect();
            let texts: Vec<&str> = rejected.iter().map(|r| r.text.as_str()).collect();
            if rows.is_empty() {
                if !rejected.is_empty() {
                    self.execute(
                        c,
                        INSERT_REJECTED,
                        &[&sources, &received, &codes, &reasons, &texts],
                    )
                    .await?;
                }
                continue;
            }
            let mut source = Vec::with_capacity(rows.len());
            let mut message_id = Vec::with_capacity(rows.len());
            let mut kind = Vec::with_capacity(rows.len());
            let mut message = Vec::with_capacity(rows.len());
            let mut received_at = Vec::with_capacity(rows.len());
            let mut status = Vec::with_capacity(rows.len());
            let mut finished_at = Vec::with_capacity(rows.len());
            let mut user_id = Vec::with_capacity(rows.len());
            let mut anonymous_id = Vec::with_capacity(rows.len());
            let mut event = Vec::with_capacity(rows.len());
            let mut trace_parent = Vec::with_capacity(rows.len());
            let mut destination = Vec::with_capacity(rows.len());
            for (r, op) in rows {
                destination.push(r.destination.as_str());
                trace_parent.push(calls.traces.get(op).copied());
                user_id.push(r.user_id.as_deref());
                anonymous_id.push(r.anonymous_id.as_deref());
                event.push(r.event.as_deref());
                source.push(r.source.as_str());
                message_id.push(r.message_id.as_str());
                kind.push(r.kind);
                message.push(r.message.as_str());
                received_at.push(r.received_at);
                status.push(if r.status == Status::Undeliverable {
                    3_i16
                } else {
                    0
                });
                // An undeliverable call is finished as it arrives: its
                // retention counts from then.
                finished_at.push((r.status != Status::Pending).then_some(r.received_at));
            }
            // A call is due as it arrives: `received_at` is its `due_at`.
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![
                &source,
                &message_id,
                &kind,
                &message,
                &received_at,
                &status,
                &received_at,
                &finished_at,
                &user_id,
                &anonymous_id,
                &event,
                &trace_parent,
                &destination,
            ];
            let sql = if rejected.is_empty() {
                INSERT_CALLS
            } else {
                let refused: [&(dyn ToSql + Sync); 5] =
                    [&sources, &received, &codes, &reasons, &texts];
                params.extend(refused);
                INSERT_CALLS_AND_REJECTED
            };
            let statement = c.prepare_cached(sql).await?;
            self.count(1);
            for stored in c.query(&statement, &params).await? {
                let key: (&str, &str, &str) =
                    (stored.try_get(0)?, stored.try_get(1)?, stored.try_get(2)?);
                if let Some(&(i, true)) = calls.owner.get(&key) {
                    if let Some(n) = new.get_mut(i) {
                        *n += 1;
                    }
                }
            }
        }
        Ok(())
    }

    async fn execute<C: GenericClient>(
        &self,
        c: &C,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> PgResult<u64> {
        let statement = c.prepare_cached(sql).await?;
        self.count(1);
        c.execute(&statement, params).await
    }

    async fn run<C: GenericClient>(&self, tx: &C, work: &Work) -> PgResult<Done> {
        match work {
            Work::Insert {
                rows,
                rejected,
                trace_parent,
            } => {
                let calls = Calls::new([(
                    0,
                    rows.as_slice(),
                    rejected.as_slice(),
                    trace_parent.as_deref(),
                )]);
                let mut new = [0];
                self.store_calls(tx, &calls, &calls.statements(), &mut new)
                    .await?;
                Ok(Done::Count(new[0]))
            }
            Work::Statements(stmts) => {
                let mut out = Vec::with_capacity(stmts.len());
                for stmt in stmts {
                    out.push(self.statement(tx, stmt).await?);
                }
                Ok(Done::Written(out))
            }
            Work::If { guard, then } => {
                // The rest goes in only over what the guard found.
                if self.statement(tx, guard).await?.count == 0 {
                    return Ok(Done::Conflict);
                }
                match then {
                    Then::Insert(rows) => {
                        let calls = Calls::new([(0, rows.as_slice(), &[][..], None)]);
                        let mut new = [0];
                        self.store_calls(tx, &calls, &calls.statements(), &mut new)
                            .await?;
                        Ok(Done::Count(new[0]))
                    }
                    Then::Statements(stmts) => {
                        let mut out = Vec::with_capacity(stmts.len());
                        for stmt in stmts {
                            out.push(self.statement(tx, stmt).await?);
                        }
                        Ok(Done::Written(out))
                    }
                }
            }
            Work::Finish { items, now } => Ok(Done::Count(self.finish(tx, items, *now).await?)),
        }
    }

    /// Runs `stmt`: its rows when it returns any (a `SELECT`, a
    /// `RETURNING`), else the rows it changed.
    async fn statement<C: GenericClient>(&self, c: &C, stmt: &Stmt) -> PgResult<Written> {
        let prepared = c.prepare_cached(&Dialect::Postgres.text(&stmt.sql)).await?;
        self.count(1);
        let params: Vec<&(dyn ToSql + Sync)> = stmt
            .values
            .iter()
            .map(|v| {
                let p: &(dyn ToSql + Sync) = v;
                p
            })
            .collect();
        if prepared.columns().is_empty() {
            let count = c.execute(&prepared, &params).await?;
            return Ok(Written {
                count,
                rows: Vec::new(),
            });
        }
        let rows = c
            .query(&prepared, &params)
            .await?
            .iter()
            .map(cells)
            .collect::<PgResult<Vec<_>>>()?;
        Ok(Written {
            count: rows.len() as u64,
            rows,
        })
    }

    /// One `UPDATE … FROM unnest(…)` per kind of end; returns how many were
    /// refused (their row no longer holds their token).
    async fn finish<C: GenericClient>(&self, tx: &C, items: &[Finish], now: i64) -> PgResult<u64> {
        let mut delivered = Vec::new();
        let mut retry = Vec::new();
        let mut dead = Vec::new();
        let mut undeliverable = Vec::new();
        let mut filtered = Vec::new();
        let mut release = Vec::new();
        let mut forget = Vec::new();
        for item in items {
            match item {
                Finish::Delivered { id, .. } => delivered.push((*id, item)),
                Finish::Retry { id, .. } => retry.push((*id, item)),
                Finish::Dead { id, .. } => dead.push((*id, item)),
                Finish::Undeliverable { id, .. } => undeliverable.push((*id, item)),
                Finish::Filtered { id, .. } => filtered.push((*id, item)),
                Finish::Release { id, .. } => release.push((*id, item)),
                Finish::Forget { id, .. } => forget.push((*id, item)),
            }
        }
        // Rows are locked in id order by every finish, which keeps two
        // finishes from deadlocking each other.
        for list in [
            &mut delivered,
            &mut retry,
            &mut dead,
            &mut undeliverable,
            &mut filtered,
            &mut release,
            &mut forget,
        ] {
            list.sort_by_key(|(id, _)| *id);
        }
        let mut changed = 0;
        if !delivered.is_empty() {
            let (mut ids, mut claims, mut attempts, mut outcomes, mut batches) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (_, item) in &delivered {
                if let Finish::Delivered {
                    id,
                    claim,
                    attempts: a,
                    outcome,
                    batch,
                } = item
                {
                    ids.push(*id);
                    claims.push(*claim);
                    attempts.push(int4(*a));
                    outcomes.push(outcome.as_deref());
                    batches.push(batch.as_deref());
                }
            }
            changed += self
                .execute(
                    tx,
                    FINISH_DELIVERED,
                    &[&now, &ids, &claims, &attempts, &outcomes, &batches],
                )
                .await?;
        }
        if !retry.is_empty() {
            let (mut ids, mut claims, mut attempts, mut states, mut due, mut batches) = (
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
            );
            for (_, item) in &retry {
                if let Finish::Retry {
                    id,
                    claim,
                    attempts: a,
                    state,
                    due_at,
                    batch,
                } = item
                {
                    ids.push(*id);
                    claims.push(*claim);
                    attempts.push(int4(*a));
                    states.push(state.as_deref());
                    due.push(*due_at);
                    batches.push(batch.as_deref());
                }
            }
            changed += self
                .execute(
                    tx,
                    FINISH_RETRY,
                    &[&ids, &claims, &attempts, &states, &due, &batches],
                )
                .await?;
        }
        if !dead.is_empty() {
            let (mut ids, mut claims, mut attempts, mut states, mut outcomes, mut batches) = (
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
            );
            for (_, item) in &dead {
                if let Finish::Dead {
                    id,
                    claim,
                    attempts: a,
                    state,
                    outcome,
                    batch,
                } = item
                {
                    ids.push(*id);
                    claims.push(*claim);
                    attempts.push(int4(*a));
                    states.push(state.as_deref());
                    outcomes.push(outcome.as_str());
                    batches.push(batch.as_deref());
                }
            }
            changed += self
                .execute(
                    tx,
                    FINISH_DEAD,
                    &[&now, &ids, &claims, &attempts, &states, &outcomes, &batches],
                )
                .await?;
        }
        for (status, list) in [
            (Status::Undeliverable, &undeliverable),
            (Status::Filtered, &filtered),
        ] {
            if list.is_empty() {
                continue;
            }
            let (mut ids, mut claims, mut outcomes) = (Vec::new(), Vec::new(), Vec::new());
            for (_, item) in list {
                if let Finish::Undeliverable { id, claim, outcome }
                | Finish::Filtered { id, claim, outcome } = item
                {
                    ids.push(*id);
                    claims.push(*claim);
                    outcomes.push(outcome.as_str());
                }
            }
            let sql = FINISH_UNSENT.replace("{status}", &status.as_i64().to_string());
            changed += self
                .execute(tx, &sql, &[&now, &ids, &claims, &outcomes])
                .await?;
        }
        if !release.is_empty() {
            let (mut ids, mut claims) = (Vec::new(), Vec::new());
            for (_, item) in &release {
                if let Finish::Release { id, claim } = item {
                    ids.push(*id);
                    claims.push(*claim);
                }
            }
            changed += self.execute(tx, FINISH_RELEASE, &[&ids, &claims]).await?;
        }
        if !forget.is_empty() {
            let (mut ids, mut claims) = (Vec::new(), Vec::new());
            for (_, item) in &forget {
                if let Finish::Forget { id, claim } = item {
                    ids.push(*id);
                    claims.push(*claim);
                }
            }
            changed += self.execute(tx, FINISH_FORGET, &[&ids, &claims]).await?;
        }
        Ok((items.len() as u64).saturating_sub(changed))
    }

    /// Reads on one pooled connection, outside the writers' queue, within
    /// the store's timeout. Their success makes the store healthy again.
    async fn read(&self, stmts: &[Stmt]) -> Result<Vec<Written>, StoreError> {
        let rows = self.read_aside(stmts).await?;
        self.healthy.store(true, Ordering::Release);
        Ok(rows)
    }

    /// An operator's reads (the delivery log, counts, lists): on a pooled
    /// connection, within the store's timeout, and telling nothing of the
    /// store's health either way (a slow search says nothing of ingest).
    async fn operator_read(&self, stmts: &[Stmt]) -> Result<Vec<Written>, StoreError> {
        self.run_reads(stmts)
            .await
            .map_err(|failure| self.error_of(&failure))
    }

    /// As [`Inner::read`], for the small tables beside the queue (relays'
    /// heartbeats, disabled endpoints, holds), whose single statements may
    /// write too: their success says nothing of the queue's tables, so it
    /// leaves the store's health as it is (a queue another session has
    /// locked stays unhealthy), and a failure still makes it unhealthy.
    async fn read_aside(&self, stmts: &[Stmt]) -> Result<Vec<Written>, StoreError> {
        self.run_reads(stmts)
            .await
            .map_err(|failure| self.fail(&failure))
    }

    /// `stmts` in order on one pooled connection, within the store's
    /// timeout.
    async fn run_reads(&self, stmts: &[Stmt]) -> Result<Vec<Written>, Failure> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let conn = self.conn(deadline).await?;
        let run = async {
            let mut out = Vec::with_capacity(stmts.len());
            for stmt in stmts {
                out.push(self.statement(&conn, stmt).await?);
            }
            Ok(out)
        };
        let result = tokio::time::timeout_at(deadline, run).await;
        settled(conn, result)
    }
}

/// A row of Postgres's, as [`Cells`]: every integer type an integer.
fn cells(row: &tokio_postgres::Row) -> PgResult<Cells> {
    let mut out = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let value = match *column.type_() {
            Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(i64::from).into(),
            Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(i64::from).into(),
            Type::INT8 => row.try_get::<_, Option<i64>>(i)?.into(),
            _ => row.try_get::<_, Option<String>>(i)?.into(),
        };
        out.push(value);
    }
    Ok(Cells(out))
}

/// A value bound as the parameter's type asks: the schema's `smallint`
/// and `integer` columns take an integer as readily as `bigint` ones, and a
/// list is an array.
impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Self::Null => Ok(IsNull::Yes),
            Self::Int(n) => match *ty {
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                _ => n.to_sql(ty, out),
            },
            Self::Text(t) => t.to_sql(ty, out),
            Self::Texts(l) => l.to_sql(ty, out),
            Self::Ints(l) => match *ty {
                Type::INT4_ARRAY => l
                    .iter()
                    .map(|n| i32::try_from(*n))
                    .collect::<Result<Vec<_>, _>>()?
                    .to_sql(ty, out),
                _ => l.to_sql(ty, out),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked in `to_sql`, against the type the server gave.
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

#[async_trait]
impl Engine for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn migrated(&self) -> (i64, i64) {
        self.inner.migrated
    }

    fn backlog(&self) -> usize {
        self.inner.backlog.load(Ordering::Relaxed)
    }

    fn healthy(&self) -> bool {
        self.inner.healthy.load(Ordering::Acquire)
    }

    fn statements(&self) -> u64 {
        self.inner.statements.load(Ordering::Relaxed)
    }

    fn conflicts(&self) -> u64 {
        self.inner.conflicts.load(Ordering::Relaxed)
    }

    fn shared(&self) -> bool {
        true
    }

    fn set_commit_observer(&self, observer: CommitObserver) {
        if let Ok(mut slot) = self.inner.observer.write() {
            *slot = Some(observer);
        }
    }

    async fn read(&self, kind: Read, stmts: Vec<Stmt>) -> Result<Vec<Vec<Cells>>, StoreError> {
        let written = match kind {
            Read::Relay => self.inner.read(&stmts).await?,
            Read::Operator => self.inner.operator_read(&stmts).await?,
        };
        Ok(written.into_iter().map(|w| w.rows).collect())
    }

    async fn aside(&self, stmt: Stmt) -> Result<Written, StoreError> {
        // Single statements on one endpoint's, one relay's or one hold's
        // row need no transaction of the writers'.
        self.inner
            .read_aside(std::slice::from_ref(&stmt))
            .await?
            .pop()
            .ok_or(StoreError::Closed)
    }

    async fn write(&self, stmts: Vec<Stmt>) -> Result<Vec<Written>, StoreError> {
        match self.write(Work::Statements(stmts), 0).await? {
            Done::Written(w) => Ok(w),
            Done::Count(_) | Done::Conflict => Ok(Vec::new()),
        }
    }

    async fn insert(
        &self,
        rows: Vec<Row>,
        rejected: Vec<RejectedRow>,
        trace_parent: Option<String>,
    ) -> Result<usize, StoreError> {
        let calls = rows.len() + rejected.len();
        let work = Work::Insert {
            rows,
            rejected,
            trace_parent,
        };
        Ok(usize::try_from(self.write(work, calls).await?.count()).unwrap_or(usize::MAX))
    }

    async fn write_if(&self, guard: Stmt, then: Then) -> Result<Option<Vec<Written>>, StoreError> {
        let calls = match &then {
            Then::Insert(rows) => rows.len(),
            Then::Statements(_) => 0,
        };
        match self.write(Work::If { guard, then }, calls).await? {
            Done::Conflict => Ok(None),
            Done::Written(w) => Ok(Some(w)),
            Done::Count(n) => Ok(Some(vec![Written {
                count: n,
                rows: Vec::new(),
            }])),
        }
    }

    async fn finish(&self, items: Vec<Finish>, now: i64) -> Result<usize, StoreError> {
        let refused = self.write(Work::Finish { items, now }, 0).await?.count();
        Ok(usize::try_from(refused).unwrap_or(usize::MAX))
    }

    async fn close(&self) {
        // Dropping the queue's sender lets the writer finish what is queued
        // and in flight, then stop.
        if let Ok(mut queue) = self.queue.lock() {
            queue.take();
        }
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = writer.await;
        }
        self.inner.pool.close();
    }
}

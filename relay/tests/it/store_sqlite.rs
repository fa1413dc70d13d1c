//! The SQLite store: the store contract, then what only SQLite has (the
//! file's mode and lock, migrations from older relays, the writer's time
//! limit and group commit).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::store_contract as contract;

use callpost_relay::store::sqlite;
use callpost_relay::store::{Store, StoreOptions, Synchronous};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

fn options() -> StoreOptions {
    StoreOptions {
        synchronous: Synchronous::Full,
        timeout: Duration::from_secs(10),
        exclusive: true,
        ca_file: None,
    }
}

/// A store on a new file in a directory of its own, removed when the guard
/// drops.
async fn fresh() -> (Arc<dyn Store>, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite::open(dir.path().join("relay.db"), options())
        .await
        .unwrap();
    (store, dir)
}

contract_tests!(fresh);

/// The contract over two groups: a sharded store on two files, the second
/// holding half the slots (`store_sharded` has what only groups have).
mod two_groups {
    use super::*;
    use callpost_core::shard::SlotMap;
    use callpost_relay::store::sharded;

    async fn fresh() -> (Arc<dyn Store>, TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let home = sqlite::open(dir.path().join("home.db"), options())
            .await
            .unwrap();
        let b = sqlite::open(dir.path().join("b.db"), options())
            .await
            .unwrap();
        let map = SlotMap::configured(1, &[("b".into(), "512-1023".into())]).unwrap();
        let store = sharded::open(map, vec![home, b], T0).await.unwrap();
        (store, dir)
    }

    contract_tests!(fresh);
}

/// The contract over a sealed store (`CALLPOST_RELAY_SECRET_KEY` set):
/// what goes in sealed comes out as it went in (`store_sealed` has what
/// only sealing has).
mod sealed {
    use super::*;
    use callpost_relay::seal::SealKey;
    use callpost_relay::store::sealed;

    async fn fresh() -> (Arc<dyn Store>, TempDir) {
        let (store, dir) = super::fresh().await;
        let key = SealKey::parse(crate::store_sealed::KEY_A).unwrap();
        let (store, _) = sealed::wrap(store, Arc::new(key)).await.unwrap();
        (store, dir)
    }

    contract_tests!(fresh);
}

/// One relay holds a SQLite file: it shares nothing, whoever asks.
#[tokio::test]
async fn a_sqlite_relay_delivers_alone() {
    let (store, _dir) = fresh().await;
    assert!(!store.shared());
    assert_eq!(store.heartbeat("a", 1, 0).await.unwrap(), 1);
    assert_eq!(store.heartbeat("b", 2, 0).await.unwrap(), 1);
    store.close().await;
}

// -- SQLite only -------------------------------------------------------------

use callpost_relay::store::{Finish, LogFilter, ReplayFilter, Retention, Row, StoreError};
use contract::{refused, row, T0};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// The last migration's number.
const LATEST: i64 =
    callpost_relay::store::MIGRATIONS[callpost_relay::store::MIGRATIONS.len() - 1].0;

const V1_SCHEMA: &str = include_str!("../../migrations/sqlite/0001_init.sql");

async fn open_at(path: &Path, exclusive: bool) -> Result<Arc<dyn Store>, StoreError> {
    sqlite::open(
        path.to_path_buf(),
        StoreOptions {
            exclusive,
            ..options()
        },
    )
    .await
}

fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("relay.db")
}

/// A second connection to the file, as another process would hold one.
fn side_connection(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Polls `check` until it holds; a hang guard, not a timing assertion.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The database, its WAL and the lock file are the owner's only, whatever
/// the umask.
#[tokio::test]
async fn files_are_created_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path, true).await.unwrap();
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.path().join("relay.db-wal")), 0o600);
    assert_eq!(mode(&dir.path().join("relay.db.lock")), 0o600);
    store.close().await;
}

/// An existing file keeps the mode its owner gave it.
#[tokio::test]
async fn an_existing_file_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    std::fs::write(&path, b"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(mode(&path), 0o640);
    store.close().await;
}

/// One relay per file: a second exclusive open is refused, a
/// non-exclusive one (the CLI beside a live relay) is not, and the lock
/// goes with the store's close.
#[tokio::test]
async fn a_second_relay_on_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let first = open_at(&path, true).await.unwrap();
    let Err(e) = open_at(&path, true).await else {
        panic!("a second exclusive open succeeded");
    };
    assert_eq!(
        e,
        StoreError::Refused(format!(
            "another relay is using {}; run one relay per SQLite file, or share Postgres",
            path.display()
        ))
    );
    let cli = open_at(&path, false).await.unwrap();
    cli.close().await;
    first.close().await;
    let again = open_at(&path, true).await.unwrap();
    again.close().await;
}

/// The only relay on the file takes back the leases a relay that is gone
/// held; a non-exclusive open leaves them.
#[tokio::test]
async fn an_exclusive_open_takes_back_leases() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path, true).await.unwrap();
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    let held = store.claim(T0, "a", 10, 3_600_000).await.unwrap();
    assert_eq!(held.len(), 1);
    store.close().await;

    let cli = open_at(&path, false).await.unwrap();
    assert!(cli.claim(T0, "a", 10, 1_000).await.unwrap().is_empty());
    cli.close().await;

    let store = open_at(&path, true).await.unwrap();
    let again = store.claim(T0, "a", 10, 1_000).await.unwrap();
    assert_eq!(again.len(), 1);
    // The gone relay's token no longer counts.
    let stale = Finish::Delivered {
        id: held[0].id,
        claim: held[0].claim,
        attempts: 1,
        outcome: None,
        batch: None,
    };
    assert_eq!(store.finish(vec![stale], T0).await.unwrap(), 1);
    store.close().await;
}

/// A new file runs every migration; opening it again runs none.
#[tokio::test]
async fn a_new_file_is_migrated_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.migrated(), (0, LATEST));
    store.close().await;
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.migrated(), (LATEST, LATEST));
    store.close().await;
    let version: String = side_connection(&path)
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, LATEST.to_string());
}

/// A database an older relay numbered (before SQLite had the no-op
/// migration 3 that Postgres's `0003_senders` is) is renumbered once: its
/// version 7 is this relay's 8, and only what came after runs.
#[tokio::test]
async fn a_database_numbered_by_an_older_relay_runs_only_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    {
        let conn = side_connection(&path);
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )
        .unwrap();
        // Every migration an older relay numbered 1 to 7 (all but 3, and
        // none after 8).
        for (n, sql) in callpost_relay::store::SQLITE_MIGRATIONS {
            if *n != 3 && *n <= 8 {
                conn.execute_batch(sql).unwrap();
            }
        }
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', '7')",
            [],
        )
        .unwrap();
        // An undeliverable row without the time it finished.
        conn.execute(
            "INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at) \
             VALUES ('a', 'old', 'track', '{}', ?1, 3, ?1)",
            [T0],
        )
        .unwrap();
    }
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.migrated(), (8, LATEST));
    store.close().await;
    let conn = side_connection(&path);
    let meta = |key: &str| -> String {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(meta("schema_version"), LATEST.to_string());
    assert_eq!(meta("numbering"), "shared");
    let finished: i64 = conn
        .query_row(
            "SELECT finished_at FROM deliveries WHERE message_id = 'old'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(finished, T0, "migration 9 ran");
    // Opened again: numbered as this relay numbers, nothing runs.
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.migrated(), (LATEST, LATEST));
    store.close().await;
}

/// A database made by the Python relay (schema version 1) opens, keeps
/// its calls and gains the per-source claim index.
#[tokio::test]
async fn a_version_1_database_migrates() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    {
        let conn = side_connection(&path);
        conn.execute_batch("PRAGMA journal_mode=WAL").unwrap();
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )
        .unwrap();
        conn.execute_batch(V1_SCHEMA).unwrap();
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', '1')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at) \
             VALUES ('a', 'p1', 'track', '{\"userId\":\"u9\",\"event\":\"E\"}', ?1, 0, ?1), \
             ('a', 'd1', 'track', '{}', ?1, 2, ?1), \
             ('gone', 'u1', 'track', '{}', ?1, 3, ?1)",
            [T0],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO rejected (source, received_at, code, reason, text) VALUES ('a', ?1, 'c', 'r', 't')",
            [T0],
        )
        .unwrap();
    }
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.migrated(), (1, LATEST));
    // The delivery log's columns are filled from the stored messages.
    let found = store
        .search(
            LogFilter {
                user_id: Some("u9".into()),
                event: Some("E".into()),
                ..LogFilter::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(found.rows.len(), 1);
    assert_eq!(found.rows[0].message_id, "p1");
    let stats = store.stats(T0).await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.rejected), (1, 1, 1));
    assert_eq!(stats.undeliverable, 1);
    assert_eq!(store.claim(T0, "a", 10, 1_000).await.unwrap().len(), 1);
    // The Python relay's undeliverable calls had no finish time: retention
    // now counts from their receipt, so they are purged in their turn.
    let week = 7 * 24 * 3_600_000;
    let retention = Retention {
        delivered_ms: week,
        undeliverable_ms: week,
        dead_ms: 10 * week,
        rejected_ms: 10 * week,
    };
    let purged = store.purge(T0 + week + 1, retention).await.unwrap();
    assert_eq!(purged.undeliverable, 1);
    assert_eq!(
        store
            .insert(vec![row("a", "p1", T0)], vec![])
            .await
            .unwrap(),
        0,
        "deduplicated"
    );
    store.close().await;
    let conn = side_connection(&path);
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'deliveries' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        indexes.contains(&"deliveries_source_due".to_string()),
        "{indexes:?}"
    );
    let finished_sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'deliveries_finished'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(finished_sql.contains("status <> 0"), "{finished_sql}");
}

/// A database from a newer relay is refused, untouched.
#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    open_at(&path, true).await.unwrap().close().await;
    side_connection(&path)
        .execute(
            "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let Err(e) = open_at(&path, true).await else {
        panic!("a newer schema opened");
    };
    assert!(
        matches!(&e, StoreError::Refused(m) if m.contains("schema version 99")),
        "{e:?}"
    );
    // The lock went with the failed open.
    side_connection(&path)
        .execute(
            &format!("UPDATE meta SET value = '{LATEST}' WHERE key = 'schema_version'"),
            [],
        )
        .unwrap();
    open_at(&path, true).await.unwrap().close().await;
}

/// A database that stops answering (another process holds the write
/// lock): ingest gets `Timeout` within the limit, the store says it is
/// unhealthy, and it recovers once the lock goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_database_times_out_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = sqlite::open(
        path.clone(),
        StoreOptions {
            timeout: Duration::from_millis(300),
            ..options()
        },
    )
    .await
    .unwrap();
    store
        .insert(vec![row("a", "m0", T0)], vec![])
        .await
        .unwrap();
    assert!(store.healthy());

    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let r = store.insert(vec![row("a", "m1", T0)], vec![]).await;
    assert_eq!(r, Err(StoreError::Timeout));
    // A hang guard: the limit is 300 ms.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!store.healthy());
    // Reads still answer in WAL mode; they do not make it healthy.
    assert_eq!(store.stats(T0).await.unwrap().pending, 1);
    assert!(!store.healthy());

    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(store.insert(vec![row("a", "m2", T0)], vec![]).await, Ok(1));
    assert!(store.healthy());
    assert_eq!(store.backlog(), 0);
    store.close().await;
}

/// After a failure the store becomes healthy again by itself once the
/// database answers, with no traffic (a not-ready relay gets none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_comes_back_without_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = sqlite::open(
        path.clone(),
        StoreOptions {
            timeout: Duration::from_millis(300),
            ..options()
        },
    )
    .await
    .unwrap();
    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(
        store.insert(vec![row("a", "m1", T0)], vec![]).await,
        Err(StoreError::Timeout)
    );
    assert!(!store.healthy());
    // The writer has given up on the call too: nothing is left to commit.
    eventually("the writer gave up", || store.backlog() == 0).await;
    assert!(!store.healthy());
    blocker.execute_batch("COMMIT").unwrap();
    eventually("healthy again", || store.healthy()).await;
    assert_eq!(store.stats(T0).await.unwrap().pending, 0);
    store.close().await;
}

/// Opening a file whose write lock another process holds (the CLI's
/// `migrate` beside a stuck database) ends in `Timeout` too: a busy
/// database is one that did not answer in time.
#[tokio::test]
async fn an_open_on_a_locked_file_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    open_at(&path, true).await.unwrap().close().await;
    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let r = sqlite::open(
        path.clone(),
        StoreOptions {
            timeout: Duration::from_millis(300),
            exclusive: false,
            ..options()
        },
    )
    .await;
    assert_eq!(r.err(), Some(StoreError::Timeout));
    blocker.execute_batch("COMMIT").unwrap();
    open_at(&path, false).await.unwrap().close().await;
}

/// Every statement is counted, BEGIN and COMMIT included: an insert alone
/// is BEGIN, one INSERT for the calls, one per refused call, COMMIT.
#[tokio::test]
async fn statements_are_counted() {
    let (store, _dir) = fresh().await;
    let s0 = store.statements();
    let rows: Vec<_> = (0..3).map(|i| row("a", &format!("m{i}"), T0)).collect();
    store
        .insert(rows, vec![refused("a", T0, "{}")])
        .await
        .unwrap();
    assert_eq!(store.statements() - s0, 4);
    let s1 = store.statements();
    let claimed = store.claim(T0, "a", 10, 1_000).await.unwrap();
    assert_eq!(
        store.statements() - s1,
        3,
        "BEGIN, UPDATE … RETURNING, COMMIT"
    );
    let s2 = store.statements();
    let finishes = claimed
        .iter()
        .map(|c| crate::store_contract::delivered(c, 1))
        .collect();
    store.finish(finishes, T0).await.unwrap();
    assert_eq!(
        store.statements() - s2,
        3,
        "BEGIN, one UPDATE for every delivered call, COMMIT"
    );
    let s3 = store.statements();
    store.stats(T0).await.unwrap();
    assert_eq!(store.statements() - s3, 3);
    // 1,200 calls: three multi-row INSERTs.
    let s4 = store.statements();
    let rows: Vec<_> = (0..1_200).map(|i| row("b", &format!("m{i}"), T0)).collect();
    store.insert(rows, vec![]).await.unwrap();
    assert_eq!(store.statements() - s4, 5);
    store.close().await;
}

/// The write-ahead log is copied back into the database file while the
/// relay runs (by the checkpointer the writer's WAL hook asks), and every
/// byte the writer appends to it is counted: about 8 MB of calls, in
/// commits of 100, reach the database file, and the count covers them.
/// Without a checkpoint (the hook replaces SQLite's automatic one) the
/// file would stay as small as the schema until the relay closed. That
/// the writer no longer does the copy itself is a matter of speed, which
/// the relay benchmark measures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_reaches_the_database_file_while_the_relay_runs() {
    let (store, dir) = fresh().await;
    let path = db_path(&dir);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let at_start = size(&path);
    let body = format!("{{\"text\":\"{}\"}}", "x".repeat(4_000));
    for round in 0..20 {
        let rows: Vec<_> = (0..100)
            .map(|i| row_saying("a", &format!("m{round}-{i}"), &body))
            .collect();
        store.insert(rows, vec![]).await.unwrap();
    }
    let appended = store.wal_bytes().unwrap();
    assert!(appended > 8_000_000, "{appended} bytes counted");
    eventually("the calls reach the database file", || {
        size(&path) > at_start + 4_000_000
    })
    .await;
    store.close().await;
}

/// Calls that wait together are committed together: many concurrent
/// inserts, fewer commits, every call reported once by the observer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_inserts_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(open_at(&path, true).await.unwrap());
    let commits: Arc<Mutex<Vec<usize>>> = Arc::default();
    {
        let commits = commits.clone();
        store.set_commit_observer(Arc::new(move |_took, calls| {
            commits.lock().unwrap().push(calls);
        }));
    }
    // Hold the writer so that the calls queue up behind it, as they do
    // behind an fsync under load.
    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut tasks = vec![];
    for i in 0..200 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .insert(
                    vec![row("a", &format!("m{i}"), T0)],
                    vec![refused("a", T0, "{}")],
                )
                .await
        }));
    }
    eventually("all 200 queued", || store.backlog() == 400).await;
    blocker.execute_batch("COMMIT").unwrap();
    for t in tasks {
        assert_eq!(t.await.unwrap(), Ok(1));
    }
    assert_eq!(store.backlog(), 0);
    let commits = commits.lock().unwrap().clone();
    assert_eq!(commits.iter().sum::<usize>(), 400, "{commits:?}");
    assert!(
        commits.len() < 10,
        "{} commits for 200 inserts",
        commits.len()
    );
    assert_eq!(store.stats(T0).await.unwrap().pending, 200);
    store.close().await;
}

/// Single-call inserts that wait together are stored by one multi-row
/// INSERT, and their refused calls by one more, not by statements of their
/// own: a group costs BEGIN, at most two INSERTs and COMMIT, whatever the
/// number of requests in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_call_inserts_in_a_group_share_statements() {
    const N: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(open_at(&path, true).await.unwrap());
    let commits: Arc<Mutex<Vec<usize>>> = Arc::default();
    {
        let commits = commits.clone();
        store.set_commit_observer(Arc::new(move |_took, calls| {
            commits.lock().unwrap().push(calls);
        }));
    }
    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let s0 = store.statements();
    let mut tasks = vec![];
    for i in 0..N {
        let store = store.clone();
        // Every tenth request also carries a refused call.
        let rejected = if i % 10 == 0 {
            vec![refused("a", T0, "{}")]
        } else {
            vec![]
        };
        tasks.push(tokio::spawn(async move {
            store
                .insert(vec![row("a", &format!("m{i}"), T0)], rejected)
                .await
        }));
    }
    eventually("all queued", || store.backlog() == N + N / 10).await;
    blocker.execute_batch("COMMIT").unwrap();
    for t in tasks {
        assert_eq!(t.await.unwrap(), Ok(1));
    }
    let statements = store.statements() - s0;
    let commits = commits.lock().unwrap().len() as u64;
    eprintln!(
        "{N} single-call inserts: {statements} statements in {commits} commits, \
         {:.3} per call",
        statements as f64 / N as f64
    );
    assert!(
        statements <= 4 * commits,
        "{statements} statements in {commits} commits"
    );
    assert!(
        statements * 10 <= N as u64,
        "{statements} statements for {N} calls"
    );
    let stats = store.stats(T0).await.unwrap();
    assert_eq!((stats.pending, stats.rejected), (N as i64, N as i64 / 10));
    store.close().await;
}

/// Spawns a store call once it is queued: its first poll runs it up to
/// its wait for the writer, so calls queued this way reach the writer in
/// this order.
async fn queue<F>(call: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut call = Box::pin(call);
    tokio::select! {
        biased;
        done = &mut call => tokio::spawn(async move { done }),
        () = std::future::ready(()) => tokio::spawn(call),
    }
}

/// `row` with its own message text, to tell which of two rows with the
/// same key was stored.
fn row_saying(source: &str, message_id: &str, message: &str) -> Row {
    Row {
        message: message.into(),
        ..row(source, message_id, T0)
    }
}

/// Inserts stored together each get the count of their own new calls, as
/// if they had run one after the other: a call an earlier insert of the
/// group carries is not new for a later one (and the earlier one's row is
/// the one stored), nor is a call stored before, nor a call repeated inside
/// one insert. Another operation in the group (a replay) runs beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_insert_in_a_group_counts_its_own_new_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(open_at(&path, true).await.unwrap());
    assert_eq!(store.insert(vec![row("a", "old", T0)], vec![]).await, Ok(1));
    // The writer's next commit waits in the observer until released, so
    // everything queued meanwhile goes in one group after it.
    let (entered, entered_rx) = std::sync::mpsc::channel::<()>();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(Some((entered, held))));
    let groups: Arc<Mutex<Vec<usize>>> = Arc::default();
    {
        let groups = groups.clone();
        store.set_commit_observer(Arc::new(move |_, calls| {
            groups.lock().unwrap().push(calls);
            if let Some((entered, held)) = gate.lock().unwrap().take() {
                entered.send(()).unwrap();
                // A hang guard: the test releases it long before.
                let _ = held.recv_timeout(Duration::from_secs(30));
            }
        }));
    }
    let plug = {
        let store = store.clone();
        tokio::spawn(async move { store.insert(vec![row("p", "plug", T0)], vec![]).await })
    };
    tokio::task::spawn_blocking(move || entered_rx.recv_timeout(Duration::from_secs(30)))
        .await
        .unwrap()
        .unwrap();

    let inserts: Vec<(Vec<Row>, usize, usize)> = vec![
        // (calls, refused calls, how many new)
        (
            vec![row_saying("a", "x", "first x"), row("a", "old", T0)],
            0,
            1,
        ),
        (
            vec![row_saying("a", "x", "second x"), row("a", "y", T0)],
            1,
            1,
        ),
        (vec![row("a", "old", T0)], 0, 0),
        (vec![row("a", "y", T0), row("b", "x", T0)], 0, 1),
        (vec![row("a", "z", T0), row("a", "z", T0)], 2, 1),
    ];
    let mut queued = 1;
    let mut tasks = vec![];
    for (k, (rows, refusals, _)) in inserts.iter().enumerate() {
        if k == 2 {
            let store = store.clone();
            let filter = ReplayFilter {
                calls: LogFilter {
                    message_ids: Some(vec!["none".into()]),
                    ..LogFilter::default()
                },
                ..ReplayFilter::default()
            };
            tasks.push(
                queue(async move { store.replay(T0, filter).await.map(|n| n as usize) }).await,
            );
        }
        let rows = rows.clone();
        let rejected = (0..*refusals).map(|_| refused("a", T0, "{}")).collect();
        queued += rows.len() + refusals;
        let store = store.clone();
        tasks.push(queue(async move { store.insert(rows, rejected).await }).await);
    }
    assert_eq!(store.backlog(), queued);
    let s0 = store.statements();
    release.send(()).unwrap();
    assert_eq!(plug.await.unwrap(), Ok(1));
    let mut results = vec![];
    for t in tasks {
        results.push(t.await.unwrap().unwrap());
    }
    let expected: Vec<usize> = inserts.iter().map(|(_, _, new)| *new).collect();
    assert_eq!(results[..2], expected[..2]);
    assert_eq!(results[2], 0, "the replay");
    assert_eq!(results[3..], expected[2..]);
    assert_eq!(
        *groups.lock().unwrap(),
        vec![1, queued - 1],
        "one group after the plug's"
    );
    assert_eq!(
        store.statements() - s0,
        5,
        "BEGIN, one INSERT of calls, one of refused calls, the replay's UPDATE, COMMIT"
    );
    let claimed = store.claim(T0, "a", 100, 20_000).await.unwrap();
    let mut stored: Vec<(String, String)> = claimed
        .into_iter()
        .map(|c| (c.message_id, c.message))
        .collect();
    stored.sort();
    let x = stored.iter().find(|(id, _)| id == "x").unwrap();
    assert_eq!(x.1, "first x", "the first insert's row is the one stored");
    let ids: Vec<&str> = stored.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec!["old", "x", "y", "z"]);
    assert_eq!(store.claim(T0, "b", 100, 20_000).await.unwrap().len(), 1);
    assert_eq!(store.stats(T0).await.unwrap().rejected, 3);
    store.close().await;
}

/// One operation that fails does not fail the others committed with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operation_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(open_at(&path, true).await.unwrap());
    let blocker = side_connection(&path);
    blocker
        .execute_batch(
            "CREATE TRIGGER poison BEFORE INSERT ON deliveries WHEN NEW.message_id = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
        )
        .unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut tasks = vec![];
    for id in ["m1", "poison", "m2", "m3"] {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.insert(vec![row("a", id, T0)], vec![]).await
        }));
    }
    eventually("all queued", || store.backlog() == 4).await;
    blocker.execute_batch("COMMIT").unwrap();
    let mut results = vec![];
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert_eq!(results[0], Ok(1));
    assert!(
        matches!(&results[1], Err(StoreError::Unavailable(m)) if m.contains("poisoned")),
        "{results:?}"
    );
    assert_eq!(results[2], Ok(1));
    assert_eq!(results[3], Ok(1));
    assert_eq!(store.stats(T0).await.unwrap().pending, 3);
    store.close().await;
}

/// A purge deletes in bounded chunks (each its own transaction) until
/// nothing older is left.
#[tokio::test]
async fn purge_runs_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = open_at(&path, true).await.unwrap();
    let rows: Vec<_> = (0..20_001)
        .map(|i| row("a", &format!("m{i}"), T0))
        .collect();
    store.insert(rows, vec![]).await.unwrap();
    side_connection(&path)
        .execute("UPDATE deliveries SET status = 1, finished_at = ?1", [T0])
        .unwrap();
    let retention = Retention {
        delivered_ms: 1,
        undeliverable_ms: 1,
        dead_ms: 1,
        rejected_ms: 1,
    };
    let s0 = store.statements();
    let purged = store.purge(T0 + 2, retention).await.unwrap();
    assert_eq!(purged.delivered, 20_001);
    // Delivered: 10,000 + 10,000 + 1; then one (empty) chunk for each other
    // kind (filtered, undeliverable, dead, refused); each chunk is BEGIN,
    // DELETE, COMMIT. Then the planner's statistics are refreshed: BEGIN,
    // PRAGMA optimize, COMMIT.
    assert_eq!(store.statements() - s0, 3 * (3 + 4) + 3);
    assert_eq!(store.stats(T0).await.unwrap().delivered, 0);
    store.close().await;
}

/// After close, the queued work is committed and the file can be opened
/// by the next relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_commits_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(open_at(&path, true).await.unwrap());
    let blocker = side_connection(&path);
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let insert = {
        let store = store.clone();
        tokio::spawn(async move { store.insert(vec![row("a", "m1", T0)], vec![]).await })
    };
    eventually("queued", || store.backlog() == 1).await;
    let closing = {
        let store = store.clone();
        tokio::spawn(async move { store.close().await })
    };
    blocker.execute_batch("COMMIT").unwrap();
    closing.await.unwrap();
    assert_eq!(insert.await.unwrap(), Ok(1));
    assert_eq!(
        store.replay(T0, ReplayFilter::default()).await,
        Err(StoreError::Closed)
    );
    let store = open_at(&path, true).await.unwrap();
    assert_eq!(store.stats(T0).await.unwrap().pending, 1);
    store.close().await;
}

/// A writer that stops answering (here: held inside the commit observer,
/// as a slow fsync would hold it): every caller gets `Timeout` at the
/// limit, whatever SQLite's own busy handling does. The call that
/// committed while its caller waited in vain is never reported as a
/// success; the one its caller gave up on before the writer reached it
/// is never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_writer_times_out_its_callers() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Arc::new(
        sqlite::open(
            path.clone(),
            StoreOptions {
                timeout: Duration::from_millis(300),
                ..options()
            },
        )
        .await
        .unwrap(),
    );
    let (release, held) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(Some(held)));
    {
        let gate = gate.clone();
        store.set_commit_observer(Arc::new(move |_, _| {
            if let Some(held) = gate.lock().unwrap().take() {
                // A hang guard: the test releases it long before.
                let _ = held.recv_timeout(Duration::from_secs(30));
            }
        }));
    }
    let started = Instant::now();
    let first = store.insert(vec![row("a", "m0", T0)], vec![]).await;
    assert_eq!(first, Err(StoreError::Timeout));
    let second = store.insert(vec![row("a", "m1", T0)], vec![]).await;
    assert_eq!(second, Err(StoreError::Timeout));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!store.healthy());
    assert_eq!(store.backlog(), 2, "both still with the writer");

    release.send(()).unwrap();
    eventually("the writer caught up", || store.backlog() == 0).await;
    assert_eq!(store.insert(vec![row("a", "m2", T0)], vec![]).await, Ok(1));
    assert!(store.healthy());
    let claimed = store.claim(T0, "a", 10, 1_000).await.unwrap();
    let ids: Vec<_> = claimed.iter().map(|c| c.message_id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["m0", "m2"],
        "m0 committed late; m1 was dropped unrun"
    );
    store.close().await;
}

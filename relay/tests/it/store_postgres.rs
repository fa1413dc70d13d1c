//! The Postgres store: the store contract, then what only Postgres has
//! (migrations from the Python relay's database and under concurrent
//! starts, group commit with one bad write, conflicts run again, the time
//! limit on a stuck database, a restart of the server, secrets kept out of
//! errors, TLS as `sslmode` says).
//!
//! Needs a server: `bash scripts/postgres.sh start` prints its URL; pass it
//! as `CALLPOST_PG_URL`. Without it every test here fails, unless
//! `CALLPOST_SKIP_PG=1` says to skip them. Each test makes a database of
//! its own and drops it at the end. The restart test starts and stops a
//! second throwaway cluster of its own (port 25439, under
//! target/pg-store-test), so the shared one is never stopped; the TLS test
//! likewise (port 25437, under target/pg-tls-test, with `ssl = on` and a
//! self-signed certificate).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::store_contract as contract;

use callpost_relay::store::postgres;
use callpost_relay::store::{
    Finish, LogFilter, Purged, RejectedRow, ReplayFilter, Retention, Row, Status, Store,
    StoreError, StoreOptions, Synchronous,
};
use contract::{refused, row, T0};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres::{Client, NoTls};

/// The last migration's number.
const LATEST: i64 =
    callpost_relay::store::MIGRATIONS[callpost_relay::store::MIGRATIONS.len() - 1].0;

/// A hang guard, never a measure of speed.
const HANG: Duration = Duration::from_secs(60);

/// The server's URL, or `None` when the Postgres tests are to be skipped.
fn admin_url() -> Option<String> {
    match std::env::var("CALLPOST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CALLPOST_SKIP_PG").as_deref() == Ok("1") => {
            eprintln!("CALLPOST_SKIP_PG=1: the Postgres store tests are skipped");
            None
        }
        _ => panic!(
            "CALLPOST_PG_URL is not set: start a throwaway server with \
             `bash scripts/postgres.sh start` and export the URL it prints as CALLPOST_PG_URL \
             (or set CALLPOST_SKIP_PG=1 to skip the Postgres tests)"
        ),
    }
}

fn pg_available() -> bool {
    admin_url().is_some()
}

fn options(timeout: Duration) -> StoreOptions {
    StoreOptions {
        synchronous: Synchronous::Full,
        timeout,
        exclusive: true,
        ca_file: None,
    }
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let prefix = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{prefix}/{name}?{q}"),
        None => format!("{prefix}/{name}"),
    }
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

fn random_hex() -> String {
    format!("{:016x}", getrandom::u64().unwrap())
}

/// A throwaway database, dropped (with its connections) when the guard is.
struct Db {
    admin: String,
    name: String,
    url: String,
}

impl Db {
    async fn new(admin: &str) -> Self {
        let name = format!("relay_{}", random_hex());
        connect(admin)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        Self {
            admin: admin.to_owned(),
            url: with_database(admin, &name),
            name,
        }
    }

    async fn client(&self) -> Client {
        connect(&self.url).await
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Its own thread and runtime: the test's runtime may be gone.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                if let Ok((client, connection)) = tokio_postgres::connect(&admin, NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&sql).await;
                }
            });
        })
        .join();
    }
}

/// The contract's factory: a store on a database of its own.
async fn fresh() -> (Arc<dyn Store>, Db) {
    let db = Db::new(&admin_url().unwrap()).await;
    let store = postgres::open(&db.url, options(Duration::from_secs(10)))
        .await
        .unwrap();
    (store, db)
}

contract_tests!(fresh, if pg_available());

/// The contract over two groups: a sharded store on two databases, the
/// second holding half the slots.
mod two_groups {
    use super::*;
    use callpost_core::shard::SlotMap;
    use callpost_relay::store::sharded;

    async fn fresh() -> (Arc<dyn Store>, (Db, Db)) {
        let admin = admin_url().unwrap();
        let (home_db, b_db) = (Db::new(&admin).await, Db::new(&admin).await);
        let home = postgres::open(&home_db.url, options(Duration::from_secs(10)))
            .await
            .unwrap();
        let b = postgres::open(&b_db.url, options(Duration::from_secs(10)))
            .await
            .unwrap();
        let map = SlotMap::configured(1, &[("b".into(), "512-1023".into())]).unwrap();
        let store = sharded::open(map, vec![home, b], T0).await.unwrap();
        (store, (home_db, b_db))
    }

    contract_tests!(fresh, if pg_available());
}

/// A fresh database and its store, for the tests below.
async fn store_on(timeout: Duration) -> Option<(Arc<dyn Store>, Db)> {
    let admin = admin_url()?;
    let db = Db::new(&admin).await;
    let store = postgres::open(&db.url, options(timeout)).await.unwrap();
    Some((store, db))
}

async fn count(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// Waits until `n` of the database's backends wait for a lock.
async fn backends_waiting(client: &Client, db: &Db, n: i64) {
    tokio::time::timeout(HANG, async {
        loop {
            let waiting: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = $1 AND wait_event_type = 'Lock'",
                    &[&db.name],
                )
                .await
                .unwrap()
                .get(0);
            if waiting >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the store's transactions wait for the lock");
}

// -- migrations -----------------------------------------------------------

/// A database made by the Python relay (schema version 1, as its
/// migration wrote it) opens, migrates to the current version, and keeps
/// its calls; its undeliverable rows, stored with no finish time, are
/// purged by when they were received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_a_python_relay_database() {
    let Some(admin) = admin_url() else { return };
    let db = Db::new(&admin).await;
    let client = db.client().await;
    client
        .batch_execute(include_str!("../../migrations/postgres/0001_init.sql"))
        .await
        .unwrap();
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta (key, value) VALUES ('schema_version', '1');",
        )
        .await
        .unwrap();
    let t0 = T0.to_string();
    client
        .batch_execute(&format!(
            "INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at) \
             VALUES ('a', 'p1', 'track', '{{}}', {t0}, 0, {t0}), ('a', 'u1', 'track', '{{}}', {t0}, 3, {t0});
             INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at, \
             attempts, outcome, finished_at) \
             VALUES ('a', 'd1', 'track', '{{}}', {t0}, 2, {t0}, 3, '{{\"kind\":\"gave_up\"}}', {t0});"
        ))
        .await
        .unwrap();

    let store = postgres::open(&db.url, options(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(store.migrated(), (1, LATEST));
    let version: String = client
        .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, LATEST.to_string());
    let indexes = count(
        &client,
        "SELECT count(*) FROM pg_indexes WHERE indexname = 'deliveries_source_due' \
         OR (indexname = 'deliveries_finished' AND indexdef LIKE '%(status, finished_at)%')",
    )
    .await;
    assert_eq!(indexes, 2, "migration 2 ran");

    let stats = store.stats(T0).await.unwrap();
    assert_eq!((stats.pending, stats.dead, stats.undeliverable), (1, 1, 1));
    let dead = store.dead_letters(10).await.unwrap();
    assert_eq!(dead[0].message_id, "d1");
    assert_eq!(dead[0].attempts, 3);
    let claimed = store.claim(T0, "a", 10, 20_000).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].message_id, "p1");

    let day = 86_400_000;
    let retention = Retention {
        delivered_ms: day,
        undeliverable_ms: day,
        dead_ms: 10 * day,
        rejected_ms: day,
    };
    let purged = store.purge(T0 + 2 * day, retention).await.unwrap();
    assert_eq!(
        purged,
        Purged {
            undeliverable: 1,
            ..Purged::default()
        }
    );

    // Opened again: nothing to run.
    store.close().await;
    let again = postgres::open(&db.url, options(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(again.migrated(), (LATEST, LATEST));
    again.close().await;
}

/// A database migrated by a newer relay is refused, not downgraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_newer_schema() {
    let Some((store, db)) = store_on(Duration::from_secs(10)).await else {
        return;
    };
    store.close().await;
    db.client()
        .await
        .batch_execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        .await
        .unwrap();
    let err = postgres::open(&db.url, options(Duration::from_secs(10)))
        .await
        .unwrap_err();
    match err {
        StoreError::Refused(message) => {
            assert!(
                message.contains(&format!("this relay's {LATEST}")),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Relays starting together on a fresh database do not race: one runs the
/// migrations under the advisory lock, the others find them done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_opens_migrate_once() {
    let Some(admin) = admin_url() else { return };
    let db = Db::new(&admin).await;
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let url = db.url.clone();
            tokio::spawn(
                async move { postgres::open(&url, options(Duration::from_secs(30))).await },
            )
        })
        .collect();
    let mut migrated = vec![];
    for open in opens {
        let store = open.await.unwrap().unwrap();
        migrated.push(store.migrated());
        store.close().await;
    }
    migrated.sort_unstable();
    let mut want = vec![(LATEST, LATEST); 6];
    want[0] = (0, LATEST);
    assert_eq!(migrated, want);
}

// -- group commit -----------------------------------------------------------

/// Writes queued together commit together; when the server refuses one of
/// them, it fails alone and the others of its group commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_write_fails_alone_in_its_group() {
    let Some((store, db)) = store_on(Duration::from_secs(30)).await else {
        return;
    };
    let commits: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = commits.clone();
    store.set_commit_observer(Arc::new(move |_, calls| seen.lock().unwrap().push(calls)));

    // Every writer is held on a table lock, one at a time (four spawned at
    // once may go in as fewer groups, and leave a writer free), so the
    // next writes queue up and go in as one group once a writer is free.
    let (locker, blockers) = hold_writers(&store, &db, "a").await;
    let insert = |id: String| {
        let store = store.clone();
        tokio::spawn(async move { store.insert(vec![row("a", &id, T0)], vec![]).await })
    };
    let good1 = insert("g1".into());
    // TEXT cannot hold U+0000: the server refuses this one.
    let bad = insert("bad\0id".into());
    let good2 = insert("g2".into());
    tokio::time::timeout(HANG, async {
        while store.backlog() < 7 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    locker.batch_execute("COMMIT").await.unwrap();

    for b in blockers {
        assert_eq!(b.await.unwrap().unwrap(), 1);
    }
    assert_eq!(good1.await.unwrap().unwrap(), 1);
    assert_eq!(good2.await.unwrap().unwrap(), 1);
    match bad.await.unwrap() {
        Err(StoreError::Unavailable(message)) => {
            assert!(message.contains("22021"), "the server's code: {message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(store.healthy(), "a refused write is not a sick database");
    assert_eq!(store.backlog(), 0);
    assert_eq!(store.stats(T0).await.unwrap().pending, 6);
    // The group of three failed, then each ran alone: the good two
    // committed one by one.
    let commits = commits.lock().unwrap().clone();
    assert_eq!(commits.iter().sum::<usize>(), 6, "{commits:?}");
    store.close().await;
}

/// A transaction the server aborts for a deadlock runs again, and is
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlocked_transaction_runs_again() {
    let Some((store, db)) = store_on(Duration::from_secs(30)).await else {
        return;
    };
    store
        .insert(vec![row("a", "first", T0), row("a", "second", T0)], vec![])
        .await
        .unwrap();
    let claimed = store.claim(T0, "a", 10, 20_000).await.unwrap();
    assert_eq!(claimed.len(), 2);
    let token = claimed[0].claim;
    let second = claimed
        .iter()
        .find(|c| c.message_id == "second")
        .unwrap()
        .id;

    // The other session holds `second`; the store's renewal takes the
    // table's row-exclusive lock and waits for `second`; then the other
    // session asks for a share lock on the table. The store's session finds
    // the deadlock (its wait began first, and the other's deadlock_timeout
    // is longer) and is aborted; the other session gets its lock at once,
    // and commits; the renewal runs again.
    let other = db.client().await;
    other
        .batch_execute(&format!(
            "BEGIN; SET LOCAL deadlock_timeout = '20s'; \
             SELECT 1 FROM deliveries WHERE id = {second} FOR UPDATE"
        ))
        .await
        .unwrap();
    let renewing = {
        let store = store.clone();
        tokio::spawn(async move { store.renew(vec![token], T0 + 99_000).await })
    };
    let watcher = db.client().await;
    backends_waiting(&watcher, &db, 1).await;
    other
        .batch_execute("LOCK TABLE deliveries IN SHARE MODE; COMMIT")
        .await
        .unwrap();
    tokio::time::timeout(HANG, renewing)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(store.conflicts(), 1);
    let renewed = count(
        &watcher,
        "SELECT count(*) FROM deliveries WHERE lease_until = 1700000099000",
    )
    .await;
    assert_eq!(renewed, 2, "the renewal ran again and committed");
    store.close().await;
}

/// Statements are counted (BEGIN and COMMIT included), each commit is
/// reported with the calls it stored, and the backlog is what waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_commits_and_backlog() {
    let Some((store, _db)) = store_on(Duration::from_secs(10)).await else {
        return;
    };
    let commits: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = commits.clone();
    store.set_commit_observer(Arc::new(move |_, calls| seen.lock().unwrap().push(calls)));
    // The pool's connection is set up by now (the migrations used it).
    let before = store.statements();
    let rows: Vec<Row> = (0..20).map(|i| row("a", &format!("m{i}"), T0)).collect();
    assert_eq!(
        store
            .insert(rows, vec![refused("a", T0, "{}")])
            .await
            .unwrap(),
        20
    );
    assert_eq!(
        store.statements() - before,
        1,
        "one INSERT … SELECT (its refused call in it), a transaction of its own"
    );
    assert_eq!(*commits.lock().unwrap(), vec![21]);
    assert_eq!(store.backlog(), 0);

    let before = store.statements();
    let claimed = store.claim(T0, "a", 100, 20_000).await.unwrap();
    assert_eq!(claimed.len(), 20);
    assert_eq!(store.statements() - before, 1, "one UPDATE for many");
    let before = store.statements();
    let finishes = claimed
        .iter()
        .map(|c| crate::store_contract::delivered(c, 1))
        .collect();
    assert_eq!(store.finish(finishes, T0).await.unwrap(), 0);
    assert_eq!(store.statements() - before, 1, "one UPDATE for many");
    // Two kinds of end are two statements: one transaction.
    let claimed = {
        let rows = (0..2).map(|i| row("b", &format!("m{i}"), T0)).collect();
        store.insert(rows, vec![]).await.unwrap();
        store.claim(T0, "b", 100, 20_000).await.unwrap()
    };
    let before = store.statements();
    let finishes = vec![
        Finish::Delivered {
            id: claimed[0].id,
            claim: claimed[0].claim,
            attempts: 1,
            outcome: None,
            batch: None,
        },
        Finish::Release {
            id: claimed[1].id,
            claim: claimed[1].claim,
        },
    ];
    assert_eq!(store.finish(finishes, T0).await.unwrap(), 0);
    assert_eq!(store.statements() - before, 4, "BEGIN, two UPDATEs, COMMIT");
    store.close().await;
}

/// Spawns a store call once it is queued: its first poll runs it up to
/// its wait for a writer, so calls queued this way reach the writers in
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

type Held = Vec<tokio::task::JoinHandle<Result<usize, StoreError>>>;

/// Holds all of the store's writers: each inserts a call of source
/// `source` and waits for a lock on `deliveries` that the returned session
/// holds, so the writes queued next go in as one group once the session
/// commits.
async fn hold_writers(store: &Arc<dyn Store>, db: &Db, source: &str) -> (Client, Held) {
    let locker = db.client().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE deliveries IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let watcher = db.client().await;
    let mut held = vec![];
    for i in 0..4 {
        let store = store.clone();
        let source = source.to_owned();
        held.push(tokio::spawn(async move {
            store
                .insert(vec![row(&source, &format!("held{i}"), T0)], vec![])
                .await
        }));
        // One at a time, so that each is a group of its own.
        backends_waiting(&watcher, db, i + 1).await;
    }
    (locker, held)
}

/// Makes the pool open a connection for each writer, so that a count of
/// statements taken afterwards has no connection's setup in it.
async fn warm_up(store: &Arc<dyn Store>, db: &Db) {
    let (locker, held) = hold_writers(store, db, "warm").await;
    locker.batch_execute("COMMIT").await.unwrap();
    for h in held {
        assert_eq!(h.await.unwrap(), Ok(1));
    }
}

/// Single-call inserts that wait together are stored by one statement (the
/// refused calls among them in it too), which is a transaction of its own:
/// a group costs one statement, whatever the number of requests in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_call_inserts_in_a_group_share_statements() {
    const N: usize = 200;
    let Some((store, db)) = store_on(Duration::from_secs(30)).await else {
        return;
    };
    let commits: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = commits.clone();
    store.set_commit_observer(Arc::new(move |_, calls| seen.lock().unwrap().push(calls)));
    warm_up(&store, &db).await;
    commits.lock().unwrap().clear();
    let s0 = store.statements();
    let (locker, held) = hold_writers(&store, &db, "a").await;
    let mut tasks = vec![];
    for i in 0..N {
        let store = store.clone();
        // Every tenth request also carries a refused call.
        let rejected = if i % 10 == 0 {
            vec![refused("a", T0, "{}")]
        } else {
            vec![]
        };
        tasks.push(
            queue(async move {
                store
                    .insert(vec![row("a", &format!("m{i}"), T0)], rejected)
                    .await
            })
            .await,
        );
    }
    assert_eq!(store.backlog(), 4 + N + N / 10);
    locker.batch_execute("COMMIT").await.unwrap();
    for t in held.into_iter().chain(tasks) {
        assert_eq!(t.await.unwrap(), Ok(1));
    }
    let statements = store.statements() - s0;
    let commits = commits.lock().unwrap().clone();
    let calls = 4 + N;
    eprintln!(
        "{calls} single-call inserts: {statements} statements in {} commits, {:.3} per call",
        commits.len(),
        statements as f64 / calls as f64
    );
    assert_eq!(commits.len(), 5, "the 4 held, then one group: {commits:?}");
    assert_eq!(statements, 5, "one statement each");
    let stats = store.stats(T0).await.unwrap();
    // And the warm-up's 4.
    assert_eq!(
        (stats.pending, stats.rejected),
        (calls as i64 + 4, N as i64 / 10)
    );
    store.close().await;
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
/// one insert. Another write in the group (a replay) makes it a
/// transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_insert_in_a_group_counts_its_own_new_calls() {
    let Some((store, db)) = store_on(Duration::from_secs(30)).await else {
        return;
    };
    assert_eq!(store.insert(vec![row("a", "old", T0)], vec![]).await, Ok(1));
    let groups: Arc<Mutex<Vec<usize>>> = Arc::default();
    warm_up(&store, &db).await;
    let seen = groups.clone();
    store.set_commit_observer(Arc::new(move |_, calls| seen.lock().unwrap().push(calls)));
    let s0 = store.statements();
    let (locker, held) = hold_writers(&store, &db, "h").await;

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
    let mut calls = 0;
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
        let rejected: Vec<RejectedRow> = (0..*refusals).map(|_| refused("a", T0, "{}")).collect();
        calls += rows.len() + refusals;
        let store = store.clone();
        tasks.push(queue(async move { store.insert(rows, rejected).await }).await);
    }
    assert_eq!(store.backlog(), 4 + calls);
    locker.batch_execute("COMMIT").await.unwrap();
    for h in held {
        assert_eq!(h.await.unwrap(), Ok(1));
    }
    let mut results = vec![];
    for t in tasks {
        results.push(t.await.unwrap().unwrap());
    }
    let expected: Vec<usize> = inserts.iter().map(|(_, _, new)| *new).collect();
    assert_eq!(results[..2], expected[..2]);
    assert_eq!(results[2], 0, "the replay");
    assert_eq!(results[3..], expected[2..]);
    let groups = groups.lock().unwrap().clone();
    assert_eq!(
        groups,
        vec![1, 1, 1, 1, calls],
        "the 4 held, then one group"
    );
    assert_eq!(
        store.statements() - s0,
        4 + 4,
        "one statement for each held insert; then BEGIN, one INSERT (refused calls in it), \
         the replay's UPDATE, COMMIT"
    );
    let mut stored: Vec<(String, String)> = store
        .claim(T0, "a", 100, 20_000)
        .await
        .unwrap()
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

/// Calls of more bytes than one statement carries take several statements,
/// in one transaction: all of them are stored, or none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_one_statement_are_one_transaction() {
    let Some((store, _db)) = store_on(Duration::from_secs(60)).await else {
        return;
    };
    // 40 calls of 1 MiB: 15 to a statement of at most 16 MiB.
    let big = |id: String| row_saying("a", &id, &"x".repeat(1 << 20));
    // The last statement is refused (TEXT cannot hold U+0000): the first
    // two roll back with it.
    let mut rows: Vec<Row> = (0..40).map(|i| big(format!("n{i}"))).collect();
    rows.push(big("bad\0id".into()));
    let r = store.insert(rows, vec![refused("a", T0, "{}")]).await;
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    let stats = store.stats(T0).await.unwrap();
    assert_eq!((stats.pending, stats.rejected), (0, 0), "nothing stored");

    let rows: Vec<Row> = (0..40).map(|i| big(format!("m{i}"))).collect();
    let before = store.statements();
    assert_eq!(
        store.insert(rows, vec![refused("a", T0, "{}")]).await,
        Ok(40)
    );
    assert_eq!(
        store.statements() - before,
        5,
        "BEGIN, three INSERTs, COMMIT"
    );
    let stats = store.stats(T0).await.unwrap();
    assert_eq!((stats.pending, stats.rejected), (40, 1));
    store.close().await;
}

/// A purge deletes in bounded chunks until nothing older is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_deletes_in_chunks() {
    let Some((store, db)) = store_on(Duration::from_secs(30)).await else {
        return;
    };
    db.client()
        .await
        .batch_execute(&format!(
            "INSERT INTO deliveries (source, message_id, kind, message, received_at, status, due_at, finished_at) \
             SELECT 'a', 'm' || i, 'track', '{{}}', {T0}, 1, {T0}, {T0} FROM generate_series(1, 25000) AS i"
        ))
        .await
        .unwrap();
    let retention = Retention {
        delivered_ms: 1_000,
        undeliverable_ms: 1_000,
        dead_ms: 1_000,
        rejected_ms: 1_000,
    };
    let purged = store.purge(T0 + 2_000, retention).await.unwrap();
    assert_eq!(purged.delivered, 25_000);
    assert_eq!(store.stats(T0).await.unwrap().delivered, 0);
    store.close().await;
}

// -- a stuck or stopped database ----------------------------------------------

/// A database that stops answering ends each call at the store's time
/// limit, reads as writes; the store is unhealthy until a call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_database_times_out() {
    let Some((store, db)) = store_on(Duration::from_millis(500)).await else {
        return;
    };
    assert_eq!(
        store
            .insert(vec![row("a", "m0", T0)], vec![])
            .await
            .unwrap(),
        1
    );
    let locker = db.client().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let r = tokio::time::timeout(HANG, store.insert(vec![row("a", "m1", T0)], vec![]))
        .await
        .expect("the store's own limit ends the call");
    assert_eq!(r, Err(StoreError::Timeout));
    assert!(!store.healthy());
    let r = tokio::time::timeout(HANG, store.next_due(T0))
        .await
        .unwrap();
    assert_eq!(r, Err(StoreError::Timeout));
    let r = tokio::time::timeout(HANG, store.claim(T0, "a", 10, 20_000))
        .await
        .unwrap();
    assert!(matches!(r, Err(StoreError::Timeout)), "{r:?}");
    assert!(!store.healthy());

    locker.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        store
            .insert(vec![row("a", "m2", T0)], vec![])
            .await
            .unwrap(),
        1
    );
    assert!(store.healthy(), "a call succeeded");
    tokio::time::timeout(HANG, async {
        while store.backlog() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the timed-out writes are settled");
    store.close().await;
}

/// A second cluster of this test's own (`scripts/postgres.sh` on another
/// port and directory).
#[derive(Clone)]
struct Cluster {
    script: String,
    port: String,
    dir: String,
}

impl Cluster {
    fn run(&self, action: &str) -> String {
        let out = std::process::Command::new("bash")
            .arg(&self.script)
            .arg(action)
            .env("CALLPOST_PG_PORT", &self.port)
            .env("CALLPOST_PG_DIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "postgres.sh {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    async fn run_async(&self, action: &'static str) -> String {
        let cluster = self.clone();
        tokio::task::spawn_blocking(move || cluster.run(action))
            .await
            .unwrap()
    }
}

/// Stops the cluster however the test ends.
struct Stopper(Cluster);

impl Drop for Stopper {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(&self.0.script)
            .arg("stop")
            .env("CALLPOST_PG_PORT", &self.0.port)
            .env("CALLPOST_PG_DIR", &self.0.dir)
            .output();
    }
}

/// While Postgres is down, writes fail fast (not at the time limit) and the
/// store is unhealthy; once it is back, the pool connects again and
/// nothing stored before is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_fail_fast_while_postgres_is_down_and_resume_after() {
    if admin_url().is_none() {
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let cluster = Cluster {
        script: format!("{root}/scripts/postgres.sh"),
        port: "25439".into(),
        dir: format!("{root}/target/pg-store-test"),
    };
    let _stopper = Stopper(cluster.clone());
    let url = cluster.run_async("start").await;
    let db = Db::new(&url).await;
    // A long limit: "fast" must come from the refused connection, not from
    // the limit.
    let store = postgres::open(&db.url, options(Duration::from_secs(600)))
        .await
        .unwrap();
    assert_eq!(
        store
            .insert(vec![row("a", "m1", T0)], vec![])
            .await
            .unwrap(),
        1
    );

    cluster.run_async("stop").await;
    let r = tokio::time::timeout(HANG, store.insert(vec![row("a", "m2", T0)], vec![]))
        .await
        .expect("fails fast");
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    assert!(!store.healthy());
    let r = tokio::time::timeout(HANG, store.stats(T0))
        .await
        .expect("fails fast");
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    let r = tokio::time::timeout(HANG, store.insert(vec![row("a", "m2", T0)], vec![]))
        .await
        .expect("fails fast");
    assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    assert!(!store.healthy());

    cluster.run_async("start").await;
    let n = tokio::time::timeout(HANG, async {
        loop {
            match store.insert(vec![row("a", "m2", T0)], vec![]).await {
                Ok(n) => return n,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .expect("the pool connects again");
    assert_eq!(n, 1);
    assert!(store.healthy());
    assert_eq!(store.stats(T0).await.unwrap().pending, 2, "m1 and m2");
    store.close().await;
    drop(db);
}

// -- secrets --------------------------------------------------------------

/// `url` with `password` as its password (the test server trusts every
/// local connection, so any password works).
fn with_password(url: &str, password: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let Some(at) = url[start..].find('@').map(|i| start + i) else {
        return url.replacen("://", &format!("://postgres:{password}@"), 1);
    };
    let user = url[start..at].split(':').next().unwrap_or("postgres");
    format!("{}{user}:{password}{}", &url[..start], &url[at..])
}

/// The URL and its password appear in no error and not in the store's
/// Debug.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_and_password_stay_secret() {
    let Some(admin) = admin_url() else { return };
    let secret = "hunter2-s3cret";
    let check = |text: String| {
        assert!(!text.contains(secret), "{text}");
        assert!(!text.contains("postgresql://"), "{text}");
        assert!(!text.contains("postgres://"), "{text}");
    };

    // Nothing listens on port 1: a connection error.
    let err = postgres::open(
        &format!("postgresql://postgres:{secret}@127.0.0.1:1/postgres"),
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    check(format!("{err} {err:?}"));
    // A URL that does not parse.
    let err = postgres::open(
        &format!("postgresql://postgres:{secret}@127.0.0.1:notaport/postgres"),
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    check(format!("{err} {err:?}"));

    let db = Db::new(&admin).await;
    let store = postgres::open(
        &with_password(&db.url, secret),
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    check(format!("{store:?}"));
    let err = store
        .insert(vec![row("a", "bad\0id", T0)], vec![])
        .await
        .unwrap_err();
    check(format!("{err} {err:?}"));
    store.close().await;
}

/// Rows come back as they were stored, the undeliverable kind included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeliverable_rows_are_stored_finished() {
    let Some((store, db)) = store_on(Duration::from_secs(10)).await else {
        return;
    };
    let mut parked = row("a", "u1", T0);
    parked.status = Status::Undeliverable;
    store.insert(vec![parked], vec![]).await.unwrap();
    let finished: Option<i64> = db
        .client()
        .await
        .query_one(
            "SELECT finished_at FROM deliveries WHERE message_id = 'u1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(finished, Some(T0));
    store.close().await;
}

// -- relays sharing the database ------------------------------------------

/// Each delivering relay's heartbeat counts the relays heard from since
/// `expired`, itself included; one not heard from is forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_count_the_relays_heard_from_lately() {
    let Some((store, db)) = store_on(Duration::from_secs(10)).await else {
        return;
    };
    let s = 1000;
    assert!(store.shared());
    assert_eq!(store.heartbeat("a", T0, T0 - 15 * s).await.unwrap(), 1);
    assert_eq!(store.heartbeat("b", T0 + s, T0 - 14 * s).await.unwrap(), 2);
    assert_eq!(
        store.heartbeat("a", T0 + 5 * s, T0 - 10 * s).await.unwrap(),
        2
    );
    // b is not heard from again: 15 s after its last word, a is alone.
    assert_eq!(
        store.heartbeat("a", T0 + 10 * s, T0 - 5 * s).await.unwrap(),
        2
    );
    assert_eq!(
        store.heartbeat("a", T0 + 17 * s, T0 + 2 * s).await.unwrap(),
        1
    );
    let rows = count(&db.client().await, "SELECT count(*) FROM senders").await;
    assert_eq!(rows, 1, "the forgotten relay's row is gone");
    store.close().await;
}

// -- TLS ------------------------------------------------------------------

/// `url` with `param` added to its query.
fn with_param(url: &str, param: &str) -> String {
    if url.contains('?') {
        format!("{url}&{param}")
    } else {
        format!("{url}?{param}")
    }
}

/// Whether the store's connections to `db` (the pool's, named
/// callpost-relay) use TLS, as the server sees them: `None` when it has
/// none.
async fn store_tls(db: &Db) -> Option<bool> {
    let row = connect(&db.admin)
        .await
        .query_one(
            "SELECT bool_and(s.ssl), count(*) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = $1 AND a.application_name = 'callpost-relay'",
            &[&db.name],
        )
        .await
        .unwrap();
    let n: i64 = row.get(1);
    (n > 0).then(|| row.get(0))
}

/// A cluster of this test's own with `ssl = on` and a self-signed
/// certificate for 127.0.0.1 (written into its data directory, as the
/// postgres user's, 0600), reloaded until new connections see it.
/// Returns the admin URL and the certificate's PEM.
async fn tls_cluster(cluster: &Cluster) -> (String, String) {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let url = cluster.run_async("start").await;
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let data = std::path::Path::new(&cluster.dir).join("data");
    let owner = std::fs::metadata(&data).unwrap();
    for (name, pem) in [
        ("server.crt", cert.cert.pem()),
        ("server.key", cert.signing_key.serialize_pem()),
    ] {
        let path = data.join(name);
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, pem.as_bytes()).unwrap();
        std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).unwrap();
    }
    let admin = connect(&url).await;
    // Separate statements: ALTER SYSTEM refuses a multi-statement batch.
    admin
        .batch_execute("ALTER SYSTEM SET ssl = on")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    // The postmaster reloads on its own time: a new backend shows it.
    tokio::time::timeout(HANG, async {
        loop {
            let on: String = connect(&url)
                .await
                .query_one("SHOW ssl", &[])
                .await
                .unwrap()
                .get(0);
            if on == "on" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the server turns ssl on");
    (url, cert.cert.pem())
}

/// Against a server with TLS and a certificate of a private CA:
/// `sslmode=require` (and libpq's `verify-full`) connects over TLS with the
/// CA as `ca_file` and refuses without it, in an error that says why and
/// holds no password; `disable` connects without TLS; `prefer` (the
/// default) uses TLS when the certificate verifies and otherwise connects
/// without it, as libpq does. A `ca_file` with no certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_as_the_url_sslmode_says() {
    if admin_url().is_none() {
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let cluster = Cluster {
        script: format!("{root}/scripts/postgres.sh"),
        port: "25437".into(),
        dir: format!("{root}/target/pg-tls-test"),
    };
    let _stopper = Stopper(cluster.clone());
    let (url, ca_pem) = tls_cluster(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    let with_ca = || StoreOptions {
        ca_file: Some(ca_file.clone()),
        ..options(Duration::from_secs(10))
    };
    let secret = "hunter2-tls-s3cret";

    // Opens, stores, and every connection of the store is TLS.
    for mode in ["require", "verify-full", "verify-ca", "prefer"] {
        let db = Db::new(&url).await;
        let store = postgres::open(&with_param(&db.url, &format!("sslmode={mode}")), with_ca())
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        assert_eq!(
            store
                .insert(vec![row("a", "m1", T0)], vec![])
                .await
                .unwrap(),
            1
        );
        assert_eq!(store_tls(&db).await, Some(true), "sslmode={mode}");
        store.close().await;
    }
    // The default is prefer.
    let db = Db::new(&url).await;
    let store = postgres::open(&db.url, with_ca()).await.unwrap();
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    assert_eq!(store_tls(&db).await, Some(true), "the default sslmode");
    store.close().await;

    // Without the CA, require refuses: the certificate is not trusted.
    let db = Db::new(&url).await;
    let err = postgres::open(
        &with_param(&with_password(&db.url, secret), "sslmode=require"),
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("TLS") && text.contains("certificate"),
        "{text}"
    );
    assert!(!text.contains(secret), "{text}");
    assert!(!text.contains("postgresql://"), "{text}");
    assert_eq!(store_tls(&db).await, None, "no connection was made");

    // Without the CA, prefer connects without TLS; disable never tries it.
    for param in ["sslmode=prefer", "sslmode=disable"] {
        let db = Db::new(&url).await;
        let store = postgres::open(
            &with_param(&db.url, param),
            options(Duration::from_secs(10)),
        )
        .await
        .unwrap_or_else(|e| panic!("{param}: {e}"));
        store
            .insert(vec![row("a", "m1", T0)], vec![])
            .await
            .unwrap();
        assert_eq!(store_tls(&db).await, Some(false), "{param}");
        store.close().await;
    }
    // disable with the CA: still no TLS.
    let db = Db::new(&url).await;
    let store = postgres::open(&with_param(&db.url, "sslmode=disable"), with_ca())
        .await
        .unwrap();
    store
        .insert(vec![row("a", "m1", T0)], vec![])
        .await
        .unwrap();
    assert_eq!(store_tls(&db).await, Some(false), "sslmode=disable");
    store.close().await;

    // A ca_file that holds no certificate is refused, naming it.
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let err = postgres::open(
        &with_param(&db.url, "sslmode=require"),
        StoreOptions {
            ca_file: Some(empty),
            ..options(Duration::from_secs(10))
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("ca_file"), "{err}");
}

/// An sslmode the relay does not take is refused before any connection,
/// and the error says which values it takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_sslmode_is_refused() {
    let err = postgres::open(
        "postgresql://postgres:hunter2@127.0.0.1:1/postgres?sslmode=allow",
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Refused(_)), "{err:?}");
    assert!(err.to_string().contains("verify-full"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

/// `sslmode=require` against a server without TLS (the shared one) fails
/// and says so; the default, prefer, connects (the other tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_refuses_a_server_without_tls() {
    let Some(admin) = admin_url() else { return };
    let db = Db::new(&admin).await;
    let err = postgres::open(
        &with_param(&db.url, "sslmode=require"),
        options(Duration::from_secs(10)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("TLS"), "{err}");
}

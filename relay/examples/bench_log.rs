//! The delivery log's benchmark: stores a generated week of calls (a
//! million by default) through the relay's own store, then times each kind
//! of search and checks every answer against what the generator knows.
//!
//! ```text
//! bench_log --database sqlite:////tmp/log.db [--calls 1000000]
//! bench_log --database postgresql://postgres@127.0.0.1:PORT/postgres
//! ```
//!
//! `--without-log-indexes` drops the delivery log's indexes before the
//! inserts and stops after them: the two runs' insert rates are what the
//! indexes cost ingest.
//!
//! With Postgres it works in a database of its own, `callpost_bench_log`,
//! made afresh on that server. The calls are e-commerce tracks with a
//! product array, identifies with traits and pages, from 50,000 users in
//! three sources, one every 0.6 s; 98.5% end delivered, 1% pending, 0.1%
//! dead and 0.4% undeliverable (set by one UPDATE after the inserts, as a
//! week of deliveries would leave them). Each search runs through
//! [`Store::search`], as the admin API calls it, 3 times to warm up and 15
//! timed; the table gives the median and the slowest.

// A benchmark tool: its output is what it is for.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use callpost_relay::store::{
    self, Cursor, LogFilter, ReplayFilter, Row, Status, Store, StoreOptions,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T0: i64 = 1_764_000_000_000;
const WEEK_MS: i64 = 7 * 24 * 3_600_000;
const EVENTS: [&str; 5] = [
    "Order Completed",
    "Product Viewed",
    "Product Added",
    "Checkout Started",
    "Signed Up",
];
const SOURCES: [&str; 3] = ["web", "ios", "android"];

/// What the generator made call `i`: its type, event, user, source and
/// receipt.
struct Gen {
    calls: i64,
    users: i64,
}

impl Gen {
    fn kind(&self, i: i64) -> &'static str {
        match i % 10 {
            7 | 8 => "identify",
            9 => "page",
            _ => "track",
        }
    }
    fn event(&self, i: i64) -> Option<&'static str> {
        (self.kind(i) == "track").then(|| EVENTS[usize::try_from((i / 10) % 5).unwrap()])
    }
    fn user(&self, i: i64) -> String {
        format!("user-{}", i % self.users)
    }
    fn source(&self, i: i64) -> &'static str {
        SOURCES[usize::try_from((i / 7) % 3).unwrap()]
    }
    fn received_at(&self, i: i64) -> i64 {
        T0 + i * (WEEK_MS / self.calls)
    }
    /// The state the UPDATE leaves it in (row id `i + 1`).
    fn status(&self, i: i64) -> Status {
        let id = i + 1;
        if id % 1000 == 7 {
            Status::Dead
        } else if id % 100 == 3 {
            Status::Pending
        } else if id % 250 == 11 {
            Status::Undeliverable
        } else {
            Status::Delivered
        }
    }
    fn message(&self, i: i64) -> String {
        let user = self.user(i);
        match self.kind(i) {
            "track" => format!(
                r#"{{"type":"track","event":"{}","userId":"{user}","messageId":"m-{i}","timestamp":"2026-11-25T10:00:00.000Z","properties":{{"order_id":"o-{i}","total":{}.5,"currency":"EUR","products":[{{"product_id":"p-1","sku":"SKU-1","name":"Café crème 250 g","price":7.9,"quantity":2}},{{"product_id":"p-2","sku":"SKU-2","name":"Tasse","price":12.5,"quantity":1}}]}},"context":{{"library":{{"name":"analytics-node","version":"2.1.0"}},"ip":"203.0.113.9"}}}}"#,
                self.event(i).unwrap_or_default(),
                i % 300
            ),
            "identify" => format!(
                r#"{{"type":"identify","userId":"{user}","messageId":"m-{i}","traits":{{"email":"{user}@example.com","name":"Zoë Müller","plan":"pro","logins":{},"address":{{"city":"Zürich","country":"CH"}}}}}}"#,
                i % 97
            ),
            _ => format!(
                r#"{{"type":"page","userId":"{user}","messageId":"m-{i}","name":"Checkout","properties":{{"path":"/checkout","title":"Checkout"}}}}"#
            ),
        }
    }
    fn row(&self, i: i64) -> Row {
        Row {
            source: self.source(i).into(),
            destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
            first: true,
            message_id: format!("m-{i}"),
            kind: self.kind(i),
            message: self.message(i),
            received_at: self.received_at(i),
            status: Status::Pending,
            user_id: Some(self.user(i)),
            anonymous_id: None,
            event: self.event(i).map(Into::into),
        }
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The UPDATE that leaves each row in its state; the same text runs on
/// both databases.
const SETTLE: &str = "UPDATE deliveries SET \
     status = CASE WHEN id % 1000 = 7 THEN 2 WHEN id % 100 = 3 THEN 0 WHEN id % 250 = 11 THEN 3 ELSE 1 END, \
     finished_at = CASE WHEN id % 100 = 3 AND id % 1000 <> 7 THEN NULL ELSE received_at + 40 END, \
     attempts = CASE WHEN id % 1000 = 7 THEN 12 WHEN id % 100 = 3 AND id % 1000 <> 7 THEN 0 ELSE 1 END";

/// The delivery log's indexes (migration 0007; the message ids' index
/// went in migration 0013, when the deduplication key came to answer
/// searches by messageId).
const LOG_INDEXES: &str = "DROP INDEX deliveries_received; \
     DROP INDEX deliveries_user; DROP INDEX deliveries_anonymous; DROP INDEX deliveries_event";

async fn run_sql(database: &str, sql: &str) {
    if let Some(path) = database.strip_prefix("sqlite://") {
        rusqlite::Connection::open(path)
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    } else {
        let (client, conn) = tokio_postgres::connect(database, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
    }
}

async fn settle(database: &str) {
    if let Some(path) = database.strip_prefix("sqlite://") {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute(SETTLE, []).unwrap();
    } else {
        let (client, conn) = tokio_postgres::connect(database, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client.batch_execute(SETTLE).await.unwrap();
        // What autovacuum does after a change this size; without it the
        // planner would still see a table of pending rows.
        client
            .batch_execute("VACUUM ANALYZE deliveries")
            .await
            .unwrap();
    }
}

/// A fresh database of its own on the Postgres server of `url`.
async fn fresh_postgres(url: &str) -> String {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute("DROP DATABASE IF EXISTS callpost_bench_log")
        .await
        .unwrap();
    client
        .batch_execute("CREATE DATABASE callpost_bench_log")
        .await
        .unwrap();
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let base = &base[..base.rfind('/').unwrap()];
    if query.is_empty() {
        format!("{base}/callpost_bench_log")
    } else {
        format!("{base}/callpost_bench_log?{query}")
    }
}

struct Case {
    name: &'static str,
    filter: LogFilter,
    /// Pages to go through before the timed one.
    deep: usize,
    limit: usize,
    matches: Box<dyn Fn(i64) -> bool>,
}

#[tokio::main]
async fn main() {
    let database = arg("--database").expect("--database URL");
    let calls: i64 = arg("--calls").map_or(1_000_000, |n| n.parse().unwrap());
    // Not a multiple of ten: each user's calls are of every kind.
    let gen = Gen {
        calls,
        users: (calls / 20 - 1).max(1),
    };
    let database = if database.starts_with("postgres") {
        fresh_postgres(&database).await
    } else {
        let path = database.strip_prefix("sqlite://").unwrap();
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(format!("{path}-wal"));
        let _ = std::fs::remove_file(format!("{path}-shm"));
        database
    };
    let options = StoreOptions {
        synchronous: store::Synchronous::Normal,
        timeout: Duration::from_secs(120),
        exclusive: false,
        ca_file: None,
    };
    let without = std::env::args().any(|a| a == "--without-log-indexes");
    if without {
        store::open(&database, options.clone())
            .await
            .unwrap()
            .close()
            .await;
        run_sql(&database, LOG_INDEXES).await;
    }
    let store: Arc<dyn Store> = store::open(&database, options.clone()).await.unwrap();
    let started = Instant::now();
    let mut i = 0;
    while i < calls {
        let rows: Vec<Row> = (i..(i + 5_000).min(calls)).map(|k| gen.row(k)).collect();
        i += rows.len() as i64;
        store.insert(rows, vec![]).await.unwrap();
    }
    let inserted = started.elapsed();
    store.close().await;
    if without {
        println!(
            "{calls} calls stored without the log's indexes in {:.1} s ({:.0} calls/s)",
            inserted.as_secs_f64(),
            calls as f64 / inserted.as_secs_f64()
        );
        return;
    }
    let started = Instant::now();
    settle(&database).await;
    let settled = started.elapsed();
    let store: Arc<dyn Store> = store::open(&database, options).await.unwrap();
    println!(
        "{calls} calls stored in {:.1} s ({:.0} calls/s, 5,000 to an insert), states set in {:.1} s",
        inserted.as_secs_f64(),
        calls as f64 / inserted.as_secs_f64(),
        settled.as_secs_f64()
    );

    let user = format!("user-{}", gen.users / 2);
    // The event of that user's newest track call: the combined search
    // finds something.
    let user_event = (0..calls)
        .rev()
        .find_map(|i| (gen.user(i) == user).then(|| gen.event(i)).flatten())
        .expect("the user has a track call");
    let one = calls / 2 + 1;
    let hour_from = gen.received_at(calls / 3);
    let hour_to = hour_from + 3_600_000;
    let g = Arc::new(gen);
    let cases = {
        let g1 = Arc::clone(&g);
        let g2 = Arc::clone(&g);
        let g3 = Arc::clone(&g);
        let g4 = Arc::clone(&g);
        let g5 = Arc::clone(&g);
        let g6 = Arc::clone(&g);
        let g7 = Arc::clone(&g);
        let g8 = Arc::clone(&g);
        let g9 = Arc::clone(&g);
        let u1 = user.clone();
        let u2 = user.clone();
        vec![
            Case {
                name: "messageId",
                filter: LogFilter {
                    message_ids: Some(vec![format!("m-{one}")]),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| i == one),
            },
            Case {
                name: "userId (20 calls)",
                filter: LogFilter {
                    user_id: Some(user.clone()),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g1.user(i) == u1),
            },
            Case {
                name: "userId + event",
                filter: LogFilter {
                    user_id: Some(user.clone()),
                    event: Some(user_event.into()),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g2.user(i) == u2 && g2.event(i) == Some(user_event)),
            },
            Case {
                name: "event (14% of calls), first page",
                filter: LogFilter {
                    event: Some("Order Completed".into()),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g3.event(i) == Some("Order Completed")),
            },
            Case {
                name: "event, 50th page by cursor",
                filter: LogFilter {
                    event: Some("Order Completed".into()),
                    ..LogFilter::default()
                },
                deep: 49,
                limit: 100,
                matches: Box::new(move |i| g4.event(i) == Some("Order Completed")),
            },
            Case {
                name: "type = page (10%)",
                filter: LogFilter {
                    kind: Some("page".into()),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g5.kind(i) == "page"),
            },
            Case {
                name: "status = dead (0.1%)",
                filter: LogFilter {
                    status: Some(Status::Dead),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g6.status(i) == Status::Dead),
            },
            Case {
                name: "status = pending (1%)",
                filter: LogFilter {
                    status: Some(Status::Pending),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| g7.status(i) == Status::Pending),
            },
            Case {
                name: "source + one hour",
                filter: LogFilter {
                    source: Some("ios".into()),
                    since: Some(hour_from),
                    until: Some(hour_to),
                    ..LogFilter::default()
                },
                deep: 0,
                limit: 1000,
                matches: Box::new(move |i| {
                    let t = g8.received_at(i);
                    g8.source(i) == "ios" && t >= hour_from && t < hour_to
                }),
            },
            Case {
                name: "nothing (the newest)",
                filter: LogFilter::default(),
                deep: 0,
                limit: 100,
                matches: Box::new(move |i| i < g9.calls),
            },
        ]
    };

    println!();
    println!("| search | rows | median | slowest |");
    println!("|---|---|---|---|");
    for case in &cases {
        let mut want: Vec<String> = Vec::new();
        let skip = case.deep * case.limit;
        for i in (0..calls).rev() {
            if (case.matches)(i) {
                want.push(format!("m-{i}"));
                if want.len() == skip + case.limit {
                    break;
                }
            }
        }
        let want: Vec<String> = want.into_iter().skip(skip).collect();
        let mut times = Vec::new();
        for run in 0..18 {
            let mut after: Option<Cursor> = None;
            for _ in 0..case.deep {
                after = store
                    .search(case.filter.clone(), after, case.limit)
                    .await
                    .unwrap()
                    .next;
            }
            let started = Instant::now();
            let page = store
                .search(case.filter.clone(), after, case.limit)
                .await
                .unwrap();
            let took = started.elapsed();
            let got: Vec<String> = page.rows.into_iter().map(|e| e.message_id).collect();
            assert_eq!(got, want, "{}: the search found other calls", case.name);
            if run >= 3 {
                times.push(took);
            }
        }
        times.sort();
        println!(
            "| {} | {} | {:.2} ms | {:.2} ms |",
            case.name,
            want.len(),
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3
        );
    }

    // The dry run of a bulk replay counts every match.
    let filter = ReplayFilter {
        calls: LogFilter {
            event: Some("Checkout Started".into()),
            status: Some(Status::Delivered),
            ..LogFilter::default()
        },
        ..ReplayFilter::default()
    };
    let want = (0..calls)
        .filter(|&i| g.event(i) == Some("Checkout Started") && g.status(i) == Status::Delivered)
        .count() as u64;
    let started = Instant::now();
    let n = store.replayable(filter).await.unwrap();
    let took = started.elapsed();
    assert_eq!(n, want, "the dry run counted other calls");
    println!(
        "| replay dry run: delivered \"Checkout Started\" | {n} counted | {:.1} ms | |",
        took.as_secs_f64() * 1e3
    );
    store.close().await;
}

//! The ingest and delivery ceilings of shard groups, in one run
//! (`benches/groups.sh` starts the Postgres servers and runs it):
//!
//! * `one`: one group, a Postgres server of its own;
//! * `standby`: one group whose primary waits for a synchronous standby
//!   (`synchronous_commit = on`, `synchronous_standby_names = '*'`);
//! * `two`: two groups (the first server and a second one), the calls
//!   spread over them by the slot map (half the slots each).
//!
//! Each side stores the same calls as ingest does (nested e-commerce
//! events of 1,000 users, 20 to a request, 32 requests at once), then
//! delivers them to a keep-alive receiver on 127.0.0.1. It prints calls
//! per second stored and delivered, the relay's CPU and the machine's
//! (the relay, Postgres and the receiver: every process shares the cores)
//! per call, and each side's ratio to `one`. Last, the slot routing alone:
//! the time to find a call's group, beside the relay's CPU per stored call.
//!
//! ```text
//! cargo run --profile relay -p callpost-relay --example bench_groups -- \
//!     CALLS ONE_URL STANDBY_URL TWO_URL
//! ```
//!
//! Each URL names a server's maintenance database; the benchmark makes a
//! database of its own on it and drops it after.

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use callpost_core::shard::{self, SlotMap};
use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Overrides};
use callpost_relay::deliver::Deliverer;
use callpost_relay::store::{self, Row, Store, StoreOptions, Synchronous};
use callpost_relay::Relay;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/answer_receiver.rs"]
mod answer_receiver;
#[path = "common/cpu.rs"]
mod cpu;
#[path = "common/drained.rs"]
mod drained;
use answer_receiver::receiver;
use cpu::own_cpu;

/// Requests stored at once: as many SDK requests as the relay's ingest
/// takes in parallel in the relay benchmark.
const PARALLEL: usize = 32;

/// A nested e-commerce event, as the other benchmarks send (about 1 KB).
fn order(i: usize) -> String {
    format!(
        r#"{{"type":"track","userId":"user-{u}","event":"Order Completed","messageId":"m-{i}","properties":{{"order_id":"o-{i}","total":129.9,"currency":"EUR","coupon":"SPRING","products":[{{"product_id":"p-1","sku":"SKU-1","name":"Café crème ☕","price":19.9,"quantity":2,"category":"Coffee"}},{{"product_id":"p-2","sku":"SKU-2","name":"Grinder","price":90.1,"quantity":1,"category":"Équipement"}}]}},"context":{{"ip":"203.0.113.7","library":{{"name":"analytics-node","version":"2.1.0"}},"page":{{"path":"/checkout","url":"https://shop.example.com/checkout"}}}},"timestamp":"2026-11-22T10:04:05.123Z"}}"#,
        u = i % 1000
    )
}

/// The CPU every process on the machine has used, s (all cores).
fn machine_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or("");
    let t: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // Busy: all but idle (3) and iowait (4).
    let busy: f64 = t
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    busy / 100.0
}

/// A database of its own on the server `admin` names.
struct Db {
    admin: String,
    name: String,
}

impl Db {
    async fn new(admin: &str, name: &str) -> Result<(Self, String), String> {
        let client = connect(admin).await?;
        // One statement a call: neither runs inside a transaction block.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| format!("{e:?}"))?;
        }
        let url = format!(
            "{}/{name}",
            admin.rsplit_once('/').map_or(admin, |(a, _)| a)
        );
        Ok((
            Self {
                admin: admin.to_owned(),
                name: name.to_owned(),
            },
            url,
        ))
    }

    async fn drop_it(self) {
        if let Ok(c) = connect(&self.admin).await {
            let _ = c
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ))
                .await;
        }
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(client)
}

struct Side {
    stored: f64,
    delivered: f64,
    relay_cpu_ms: f64,
    machine_cpu_ms: f64,
}

/// Stores `calls` calls over `groups` (with `map`), then delivers them.
async fn run(calls: usize, map: SlotMap, urls: &[String], hook: &str) -> Result<Side, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("relay.toml");
    let text = format!(
        "database = \"{}\"\n[security]\nallow_private_networks = true\n\
         [delivery]\nconcurrency = 64\nendpoint_concurrency = 16\n\
         [[sources]]\nname = \"a\"\nwrite_keys = [\"wk-a\"]\n\
         [sources.webhooks]\nurls = [\"{hook}\"]\nshared_secret = \"s3cret\"\n",
        urls[0]
    );
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        config: Some(path.to_string_lossy().into_owned()),
        ..Overrides::default()
    };
    let cfg = config::load(&overrides, &|_| None).map_err(|e| e.to_string())?;
    let options = StoreOptions {
        synchronous: Synchronous::Full,
        timeout: Duration::from_secs(30),
        exclusive: true,
        ca_file: None,
    };
    let mut groups: Vec<Arc<dyn Store>> = Vec::new();
    for url in urls {
        groups.push(
            store::open(url, options.clone())
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let clock = Clock::new();
    let store = store::sharded::open(map, groups, clock.now_ms())
        .await
        .map_err(|e| e.to_string())?;
    let relay = Arc::new(Relay::new(cfg, Arc::clone(&store), Arc::new(clock)));
    let now = relay.clock.now();
    let mut requests: Vec<Vec<Row>> = Vec::new();
    {
        let sources = relay.sources();
        let source = sources.get("a").ok_or("no source")?;
        let mut rows = Vec::new();
        for i in 0..calls {
            let call = callpost_core::Call::from_json_str(&order(i)).map_err(|e| e.to_string())?;
            let accepted = callpost_core::ingest::originate(call, now, &mut || [7; 16])
                .map_err(|e| e.to_string())?;
            callpost_relay::ops::push_rows(&mut rows, source, accepted, now.as_millis());
            if rows.len() == 20 {
                requests.push(std::mem::take(&mut rows));
            }
        }
        if !rows.is_empty() {
            requests.push(rows);
        }
    }
    let (cpu0, machine0, started) = (own_cpu(), machine_cpu(), Instant::now());
    let queue = Arc::new(std::sync::Mutex::new(requests));
    let mut tasks = Vec::new();
    for _ in 0..PARALLEL {
        let (queue, store) = (Arc::clone(&queue), Arc::clone(&store));
        tasks.push(tokio::spawn(async move {
            loop {
                let next = queue.lock().map_err(|e| e.to_string())?.pop();
                let Some(rows) = next else {
                    return Ok::<_, String>(());
                };
                store
                    .insert(rows, vec![])
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let stored_in = started.elapsed();
    let started = Instant::now();
    let workers = Deliverer::start(Arc::clone(&relay)).map_err(|e| e.to_string())?;
    let clock = Arc::clone(&relay.clock);
    let delivered_in =
        drained::delivered_all(store.as_ref(), || clock.now_ms(), calls, started).await?;
    let (cpu2, machine2) = (own_cpu(), machine_cpu());
    workers.stop(Duration::from_secs(5)).await;
    store.close().await;
    let n = calls as f64;
    Ok(Side {
        stored: n / stored_in.as_secs_f64(),
        delivered: n / delivered_in.as_secs_f64(),
        relay_cpu_ms: (cpu2 - cpu0) * 1e3 / n,
        machine_cpu_ms: (machine2 - machine0) * 1e3 / n,
    })
}

/// ns to find the group of one call (its slot, then the map), over the
/// benchmark's calls.
fn routing_ns() -> f64 {
    let map = SlotMap::configured(1, &[("b".into(), "512-1023".into())])
        .unwrap_or_else(|_| SlotMap::single());
    let users: Vec<String> = (0..1000).map(|u| format!("user-{u}")).collect();
    let rounds = 2_000_000;
    let started = Instant::now();
    let mut sum = 0usize;
    for i in 0..rounds {
        let slot = shard::slot_of("a", Some(&users[i % 1000]), None, "m");
        sum = sum.wrapping_add(map.group_of(std::hint::black_box(slot)));
    }
    std::hint::black_box(sum);
    started.elapsed().as_nanos() as f64 / rounds as f64
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(calls), Some(one), Some(standby), Some(two)) = (
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
        args.get(2),
        args.get(3),
        args.get(4),
    ) else {
        eprintln!("usage: bench_groups CALLS ONE_URL STANDBY_URL TWO_URL");
        return ExitCode::from(2);
    };
    let result = async {
        let hook = receiver(false).await.map_err(|e| e.to_string())?;
        let half = SlotMap::configured(1, &[("b".into(), "512-1023".into())])
            .map_err(|e| e.to_string())?;
        let mut sides = Vec::new();
        for (name, servers, map) in [
            ("one", vec![one.clone()], SlotMap::single()),
            ("standby", vec![standby.clone()], SlotMap::single()),
            ("two", vec![one.clone(), two.clone()], half.clone()),
        ] {
            let mut dbs = Vec::new();
            let mut urls = Vec::new();
            for (i, s) in servers.iter().enumerate() {
                let (db, url) = Db::new(s, &format!("bench_groups_{i}")).await?;
                dbs.push(db);
                urls.push(url);
            }
            let side = run(calls, map, &urls, &hook).await;
            for db in dbs {
                db.drop_it().await;
            }
            sides.push((name, side?));
        }
        Ok::<_, String>(sides)
    }
    .await;
    match result {
        Ok(sides) => {
            let base = &sides[0].1;
            println!(
                "{calls} calls (20 a request, {PARALLEL} requests at once), each group a Postgres \
                 server on this machine:"
            );
            for (name, s) in &sides {
                println!(
                    "  {name:8} stored {:6.0} calls/s (x{:.2}), delivered {:6.0}/s (x{:.2}); \
                     CPU per call: relay {:.3} ms, machine {:.3} ms",
                    s.stored,
                    s.stored / base.stored,
                    s.delivered,
                    s.delivered / base.delivered,
                    s.relay_cpu_ms,
                    s.machine_cpu_ms
                );
            }
            let ns = routing_ns();
            println!(
                "  slot routing: {ns:.0} ns a call, x{:.5} of the relay's CPU per call with one group",
                ns / (base.relay_cpu_ms * 1e6)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_groups: {e}");
            ExitCode::FAILURE
        }
    }
}

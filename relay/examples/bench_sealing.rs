//! What sealing at rest costs (`CALLPOST_RELAY_SECRET_KEY`), in one run
//! (`benches/relay.sh` runs it): the same nested e-commerce calls stored
//! as ingest stores them (requests of 20, 32 at once) in a SQLite file with
//! `synchronous = FULL`, then delivered to a keep-alive receiver on
//! 127.0.0.1, plain and sealed, in turns.
//!
//! ```text
//! cargo run --profile relay -p callpost-relay --example bench_sealing [CALLS] [ROUNDS]
//! ```
//!
//! Prints each side's stored calls per second, deliveries per second and
//! CPU per call (this process: the store, the workers and the receiver),
//! the best of the rounds, the ratios (sealed over plain), and what the
//! sealing alone takes a call. `CALLPOST_BENCH_SIDE=plain` or `sealed`
//! runs one side (to profile it).

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Overrides};
use callpost_relay::deliver::Deliverer;
use callpost_relay::seal::SealKey;
use callpost_relay::store::{sealed, Row, Store, StoreOptions, Synchronous};
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

/// Requests stored at once, as an SDK's concurrent batches are.
const PARALLEL: usize = 32;

/// A nested e-commerce event, as the other benchmarks send (about 1 KB).
fn order(i: usize) -> String {
    format!(
        r#"{{"type":"track","userId":"user-{u}","anonymousId":"anon-{u}","event":"Order Completed","messageId":"m-{i}","properties":{{"order_id":"o-{i}","total":129.9,"currency":"EUR","coupon":"SPRING","products":[{{"product_id":"p-1","sku":"SKU-1","name":"Café crème ☕","price":19.9,"quantity":2,"category":"Coffee"}},{{"product_id":"p-2","sku":"SKU-2","name":"Grinder","price":90.1,"quantity":1,"category":"Équipement"}}]}},"context":{{"ip":"203.0.113.7","library":{{"name":"analytics-node","version":"2.1.0"}},"page":{{"path":"/checkout","url":"https://shop.example.com/checkout"}}}},"timestamp":"2026-11-22T10:04:05.123Z"}}"#,
        u = i % 1000
    )
}

/// The sealing alone, per call, µs: a message sealed (ChaCha20-Poly1305,
/// base64), and opened again.
fn crypto_alone(key: &str, calls: usize) -> Result<(f64, f64), String> {
    let keys = SealKey::parse(key).map_err(|e| e.to_string())?;
    let messages: Vec<String> = (0..calls).map(order).collect();
    let started = Instant::now();
    let sealed = messages
        .iter()
        .map(|m| keys.seal("message", m))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let seal = started.elapsed().as_secs_f64() * 1e6 / calls as f64;
    let started = Instant::now();
    for s in &sealed {
        keys.open("message", s).map_err(|e| e.to_string())?;
    }
    let open = started.elapsed().as_secs_f64() * 1e6 / calls as f64;
    Ok((seal, open))
}

/// One side's numbers.
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    stored: f64,
    delivered: f64,
    store_cpu_us: f64,
    deliver_cpu_us: f64,
}

impl Side {
    fn best(self, other: Self) -> Self {
        Self {
            stored: self.stored.max(other.stored),
            delivered: self.delivered.max(other.delivered),
            store_cpu_us: if self.store_cpu_us == 0.0 {
                other.store_cpu_us
            } else {
                self.store_cpu_us.min(other.store_cpu_us)
            },
            deliver_cpu_us: if self.deliver_cpu_us == 0.0 {
                other.deliver_cpu_us
            } else {
                self.deliver_cpu_us.min(other.deliver_cpu_us)
            },
        }
    }
}

async fn run(hook: &str, calls: usize, key: Option<&str>) -> Result<Side, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("relay.toml");
    let text = format!(
        "[security]\nallow_private_networks = true\n\
         [delivery]\nconcurrency = 64\nendpoint_concurrency = 16\n\
         [[sources]]\nname = \"a\"\nwrite_keys = [\"wk-a\"]\n\
         [sources.webhooks]\nurls = [\"{hook}\"]\nshared_secret = \"s3cret\"\n"
    );
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        config: Some(path.to_string_lossy().into_owned()),
        ..Overrides::default()
    };
    let cfg = config::load(&overrides, &|_| None).map_err(|e| e.to_string())?;
    let db = format!("sqlite:///{}", dir.path().join("relay.db").display());
    let options = StoreOptions {
        synchronous: Synchronous::Full,
        timeout: Duration::from_secs(30),
        exclusive: true,
        ca_file: None,
    };
    let raw = callpost_relay::store::open(&db, options)
        .await
        .map_err(|e| e.to_string())?;
    let (store, sealer): (Arc<dyn Store>, _) = match key {
        Some(k) => {
            let keys = Arc::new(SealKey::parse(k).map_err(|e| e.to_string())?);
            let (s, sealer) = sealed::wrap(Arc::clone(&raw), keys)
                .await
                .map_err(|e| e.to_string())?;
            (s, Some(sealer))
        }
        None => (Arc::clone(&raw), None),
    };
    let relay = Arc::new(Relay::new(cfg, Arc::clone(&store), Arc::new(Clock::new())));
    if let Some(s) = sealer {
        let _ = relay.sealer.set(s);
    }
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
    let (cpu0, started) = (own_cpu(), Instant::now());
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
    let (stored_in, cpu1) = (started.elapsed(), own_cpu());
    let started = Instant::now();
    let workers = Deliverer::start(Arc::clone(&relay)).map_err(|e| e.to_string())?;
    let clock = Arc::clone(&relay.clock);
    let delivered_in =
        drained::delivered_all(store.as_ref(), || clock.now_ms(), calls, started).await?;
    let cpu2 = own_cpu();
    workers.stop(Duration::from_secs(5)).await;
    // The test of the run: sealed, no row holds the body in plain text.
    if key.is_some() {
        let rows = raw
            .sealable(callpost_relay::store::SealTable::Calls, 0, 10)
            .await
            .map_err(|e| e.to_string())?;
        if rows.iter().any(|r| {
            r.texts[0]
                .as_deref()
                .is_none_or(|m| !callpost_relay::seal::is_sealed(m))
        }) {
            return Err("a sealed run stored a plain body".into());
        }
    }
    store.close().await;
    let n = calls as f64;
    Ok(Side {
        stored: n / stored_in.as_secs_f64(),
        delivered: n / delivered_in.as_secs_f64(),
        store_cpu_us: (cpu1 - cpu0) * 1e6 / n,
        deliver_cpu_us: (cpu2 - cpu1) * 1e6 / n,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let calls = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let rounds = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    // A fixed key: the benchmark measures the work, not the key.
    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let result = async {
        let hook = receiver(false).await.map_err(|e| e.to_string())?;
        let (mut plain, mut sealed) = (Side::default(), Side::default());
        let side = std::env::var("CALLPOST_BENCH_SIDE").unwrap_or_default();
        for _ in 0..rounds {
            if side != "sealed" {
                plain = plain.best(run(&hook, calls, None).await?);
            }
            if side != "plain" {
                sealed = sealed.best(run(&hook, calls, Some(key)).await?);
            }
        }
        Ok::<_, String>((plain, sealed, crypto_alone(key, calls)?))
    }
    .await;
    match result {
        Ok((p, s, (seal_us, open_us))) => {
            println!(
                "{calls} calls, SQLite FULL, best of {rounds} rounds: plain {:.0} stored/s \
                 ({:.1} us CPU a call), {:.0} delivered/s ({:.1} us); sealed {:.0} stored/s \
                 ({:.1} us), {:.0} delivered/s ({:.1} us); stored/s x{:.2}, delivered/s x{:.2}, \
                 CPU a call +{:.1} us to store, +{:.1} us to deliver",
                p.stored,
                p.store_cpu_us,
                p.delivered,
                p.deliver_cpu_us,
                s.stored,
                s.store_cpu_us,
                s.delivered,
                s.deliver_cpu_us,
                s.stored / p.stored,
                s.delivered / p.delivered,
                s.store_cpu_us - p.store_cpu_us,
                s.deliver_cpu_us - p.deliver_cpu_us
            );
            println!(
                "the sealing alone: {seal_us:.1} us to seal a call's message, {open_us:.1} us to \
                 open it"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_sealing: {e}");
            ExitCode::FAILURE
        }
    }
}

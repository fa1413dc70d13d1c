//! The relay's delivery with three destinations per source beside one, in
//! one run (`benches/relay.sh` runs it): the same calls, stored as ingest
//! stores them (one row per destination whose trigger takes the call), in
//! a SQLite file with `synchronous = FULL`, delivered to a keep-alive
//! receiver on 127.0.0.1.
//!
//! * one: a source with the spec's destination, one URL;
//! * three: a source with a CRM (`PUT` to a URL template, a mapped body), a
//!   warehouse (the spec's body) and a chat (a templated `{"text": …}`),
//!   each with its own URL, every call taken by all three.
//!
//! ```text
//! cargo run --profile relay -p callpost-relay --example bench_destinations [CALLS]
//! ```
//!
//! Prints each side's deliveries per second and calls per second, and the
//! ratio of deliveries per second (three over one): near 1 when a
//! destination costs the relay what a call does.

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Overrides};
use callpost_relay::deliver::Deliverer;
use callpost_relay::store::{LogFilter, StoreOptions, Synchronous};
use callpost_relay::Relay;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/answer_receiver.rs"]
mod answer_receiver;
#[path = "common/drained.rs"]
mod drained;
use answer_receiver::receiver;

/// A nested e-commerce event, as the other benchmarks send (about 1 KB).
fn order(i: usize) -> String {
    format!(
        r#"{{"type":"track","userId":"user-{u}","event":"Order Completed","messageId":"m-{i}","properties":{{"order_id":"o-{i}","total":129.9,"currency":"EUR","coupon":"SPRING","products":[{{"product_id":"p-1","sku":"SKU-1","name":"Café crème ☕","price":19.9,"quantity":2,"category":"Coffee"}},{{"product_id":"p-2","sku":"SKU-2","name":"Grinder","price":90.1,"quantity":1,"category":"Équipement"}}]}},"context":{{"ip":"203.0.113.7","library":{{"name":"analytics-node","version":"2.1.0"}},"page":{{"path":"/checkout","url":"https://shop.example.com/checkout"}}}},"timestamp":"2026-11-22T10:04:05.123Z"}}"#,
        u = i % 1000
    )
}

/// The destinations' TOML for the `three` side.
fn three(base: &str) -> String {
    format!(
        "[[sources.destinations]]\nname = \"crm\"\nmethod = \"PUT\"\n\
         urls = [\"{base}/crm/users/{{{{userId}}}}\"]\nshared_secret = \"s3cret\"\n\
         [sources.destinations.mapping]\nemail = {{ \"@path\" = \"userId\" }}\n\
         total = {{ \"@path\" = \"properties.total\" }}\n\
         [[sources.destinations]]\nname = \"warehouse\"\nurls = [\"{base}/warehouse\"]\n\
         shared_secret = \"s3cret\"\n\
         [[sources.destinations]]\nname = \"chat\"\nurls = [\"{base}/chat\"]\n\
         [sources.destinations.mapping]\n\
         text = {{ \"@template\" = \"{{{{userId}}}} ordered {{{{properties.total}}}} {{{{properties.currency}}}}\" }}\n"
    )
}

/// Stores `calls` calls of a source with `destinations` (TOML) in a fresh
/// SQLite file and delivers them: (deliveries, time until all are done).
async fn run(destinations: &str, calls: usize) -> Result<(usize, Duration), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("relay.toml");
    let text = format!(
        "[security]\nallow_private_networks = true\n\
         [delivery]\nconcurrency = 64\nendpoint_concurrency = 16\n\
         [[sources]]\nname = \"a\"\nwrite_keys = [\"wk-a\"]\n{destinations}"
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
    let store = callpost_relay::store::open(&db, options)
        .await
        .map_err(|e| e.to_string())?;
    let relay = Arc::new(Relay::new(cfg, Arc::clone(&store), Arc::new(Clock::new())));
    let now = relay.clock.now();
    let mut rows = Vec::new();
    {
        let sources = relay.sources();
        let source = sources.get("a").ok_or("no source")?;
        for i in 0..calls {
            let call = callpost_core::Call::from_json_str(&order(i)).map_err(|e| e.to_string())?;
            let accepted = callpost_core::ingest::originate(call, now, &mut || [7; 16])
                .map_err(|e| e.to_string())?;
            callpost_relay::ops::push_rows(&mut rows, source, accepted, now.as_millis());
        }
    }
    let deliveries = rows.len();
    for chunk in rows.chunks(2_000) {
        store
            .insert(chunk.to_vec(), vec![])
            .await
            .map_err(|e| e.to_string())?;
    }
    let started = Instant::now();
    let workers = Deliverer::start(Arc::clone(&relay)).map_err(|e| e.to_string())?;
    let clock = Arc::clone(&relay.clock);
    let took =
        drained::delivered_all(store.as_ref(), || clock.now_ms(), deliveries, started).await?;
    workers.stop(Duration::from_secs(5)).await;
    // Every destination's deliveries are in the log under its name.
    let logged = store
        .search(LogFilter::default(), None, 1)
        .await
        .map_err(|e| e.to_string())?;
    if logged.rows.is_empty() {
        return Err("nothing in the delivery log".into());
    }
    store.close().await;
    Ok((deliveries, took))
}

#[tokio::main]
async fn main() -> ExitCode {
    let calls = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000);
    let result = async {
        let url = receiver(false).await.map_err(|e| e.to_string())?;
        let base = url.trim_end_matches("/hook").to_owned();
        let one = run(
            &format!("[sources.webhooks]\nurls = [\"{base}/hook\"]\nshared_secret = \"s3cret\"\n"),
            calls,
        )
        .await?;
        let three = run(&three(&base), calls).await?;
        Ok::<_, String>((one, three))
    }
    .await;
    match result {
        Ok(((n1, t1), (n3, t3))) => {
            let rate = |n: usize, t: Duration| n as f64 / t.as_secs_f64();
            let (d1, d3) = (rate(n1, t1), rate(n3, t3));
            println!(
                "{calls} calls, SQLite FULL: one destination {n1} deliveries in {:.0} ms \
                 ({d1:.0}/s, {:.0} calls/s); three destinations {n3} deliveries in {:.0} ms \
                 ({d3:.0}/s, {:.0} calls/s); deliveries/s x{:.2}",
                t1.as_secs_f64() * 1e3,
                rate(calls, t1),
                t3.as_secs_f64() * 1e3,
                rate(calls, t3),
                d3 / d1
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_destinations: {e}");
            ExitCode::FAILURE
        }
    }
}

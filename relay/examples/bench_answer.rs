//! How long the relay takes to deliver to a receiver that writes its
//! answer's status line and body in two writes (Python's `http.server`,
//! many small frameworks), beside one that writes them in one: the
//! benchmark of the relay's reading of answers (`benches/relay.sh` runs
//! it). With Nagle's algorithm on the receiver's side and delayed ACKs on
//! the relay's, the second write waits about 40 ms: a relay that waited
//! for the body before recording the attempt paid that on every attempt.
//!
//! ```text
//! cargo run --profile relay -p callpost-relay --example bench_answer [CALLS]
//! ```
//!
//! Prints the time for each receiver and their ratio (about 1 when the
//! attempt's result is taken at the status line).

// A benchmark tool: its output is what it is for.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use callpost_relay::clock::Clock;
use callpost_relay::config::{self, Overrides};
use callpost_relay::deliver::Deliverer;
use callpost_relay::store::memory::MemoryStore;
use callpost_relay::store::{Row, Status, Store};
use callpost_relay::Relay;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/answer_receiver.rs"]
mod answer_receiver;
use answer_receiver::receiver;

/// Delivers `calls` calls to a [`receiver`] (the relay's delivery workers
/// over a memory store): how long until every one is delivered.
async fn run(apart: bool, calls: usize) -> Result<Duration, String> {
    let url = receiver(apart).await.map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("relay.toml");
    let text = format!(
        "[security]\nallow_private_networks = true\n\
         [delivery]\nconcurrency = 64\nendpoint_concurrency = 8\n\
         [[sources]]\nname = \"a\"\nwrite_keys = [\"wk-a\"]\n\
         [sources.webhooks]\nurls = [\"{url}\"]\nshared_secret = \"s3cret\"\n"
    );
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    let overrides = Overrides {
        config: Some(path.to_string_lossy().into_owned()),
        ..Overrides::default()
    };
    let cfg = config::load(&overrides, &|_| None).map_err(|e| e.to_string())?;
    let store = Arc::new(MemoryStore::new());
    let relay = Arc::new(Relay::new(cfg, store.clone(), Arc::new(Clock::new())));
    let now = relay.clock.now_ms();
    let rows = (0..calls)
        .map(|i| Row {
            source: "a".into(),
            message_id: format!("m-{i}"),
            destination: callpost_core::sources::DEFAULT_DESTINATION.into(),
            first: true,
            kind: "track",
            message: format!(r#"{{"type":"track","event":"E","userId":"u","messageId":"m-{i}"}}"#),
            received_at: now,
            status: Status::Pending,
            user_id: Some("u".into()),
            anonymous_id: None,
            event: Some("E".into()),
        })
        .collect();
    store
        .insert(rows, vec![])
        .await
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let workers = Deliverer::start(Arc::clone(&relay)).map_err(|e| e.to_string())?;
    let delivered = || {
        store
            .rows()
            .iter()
            .filter(|r| r.status == Status::Delivered)
            .count()
    };
    while delivered() < calls {
        // A call the relay gave up on is never delivered: say why at once.
        if let Some(dead) = store.rows().iter().find(|r| r.status == Status::Dead) {
            return Err(format!("a call was given up: {:?}", dead.outcome));
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!(
                "{} of {calls} delivered in 10 minutes",
                delivered()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    workers.stop(Duration::from_secs(5)).await;
    Ok(took)
}

#[tokio::main]
async fn main() -> ExitCode {
    let calls = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let result = async {
        let together = run(false, calls).await?;
        let apart = run(true, calls).await?;
        Ok::<_, String>((together, apart))
    }
    .await;
    match result {
        Ok((together, apart)) => {
            println!(
                "{calls} deliveries: {:.0} ms to a receiver writing status and body together, \
                 {:.0} ms apart: x{:.2}",
                together.as_secs_f64() * 1e3,
                apart.as_secs_f64() * 1e3,
                apart.as_secs_f64() / together.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_answer: {e}");
            ExitCode::FAILURE
        }
    }
}

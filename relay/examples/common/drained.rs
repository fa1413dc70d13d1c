//! Waiting for a benchmark's deliveries to end, shared by the examples that
//! measure delivery.

use callpost_relay::store::Store;
use std::time::{Duration, Instant};

/// Waits, looking every 10 ms, until `store` holds no pending delivery,
/// and checks that `expected` were delivered; the time since `started`.
/// Gives up after 10 minutes.
pub(crate) async fn delivered_all(
    store: &dyn Store,
    now_ms: impl Fn() -> i64,
    expected: usize,
    started: Instant,
) -> Result<Duration, String> {
    loop {
        let stats = store.stats(now_ms()).await.map_err(|e| e.to_string())?;
        if stats.pending == 0 {
            if usize::try_from(stats.delivered).unwrap_or(0) != expected {
                return Err(format!(
                    "{} of {expected} delivered ({stats:?})",
                    stats.delivered
                ));
            }
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("not delivered in 10 minutes: {stats:?}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

//! The relay's chores on their own intervals, apart from ingest and
//! delivery: retention, the store's counts for `/metrics` and the
//! operator's status events, the delivering relays' heartbeats and the
//! disabled endpoints they share, and the console's last hour.
//!
//! Each is a task the composition root ([`crate::app`]) starts and aborts;
//! none holds anything that must be finished at a stop.

pub mod history;

use crate::state::Relay;
use crate::store::{Purged, StoreError};
use callpost_core::protection::{SENDER_EXPIRY_MS, SENDER_HEARTBEAT_MS};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Deletes finished rows past their retention this often: retention is
/// counted in hours and days, so an hour late is within it.
pub const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// The queue gauges of `/metrics` are read from the store this often: a
/// scrape itself never touches the database, and Prometheus scrapes every
/// 15-60 s by default.
pub const STATS_EVERY: Duration = Duration::from_secs(5);

/// Retention and the store's counts, on their intervals, until aborted.
pub async fn run(relay: Arc<Relay>) {
    let mut purge = tokio::time::interval(PURGE_EVERY);
    let mut stats = tokio::time::interval(STATS_EVERY);
    loop {
        tokio::select! {
            _ = purge.tick() => self::purge(&relay).await,
            _ = stats.tick() => read_stats(&relay).await,
        }
    }
}

async fn purge(relay: &Relay) {
    let now = relay.clock.now_ms();
    // Each source with a retention of its own is purged by it, every other
    // by the relay's.
    let own: Vec<(String, crate::store::Retention)> = relay
        .sources()
        .list
        .iter()
        .filter_map(|s| {
            s.retention
                .over(relay.cfg.retention)
                .map(|r| (s.name.clone(), r))
        })
        .collect();
    match relay
        .store
        .purge_sources(now, relay.cfg.retention, own)
        .await
    {
        Ok(p) if p != Purged::default() => tracing::info!(
            "deleted past their retention: {} delivered, {} dead, {} undeliverable, {} rejected",
            p.delivered,
            p.dead,
            p.undeliverable,
            p.rejected
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("purging past retention failed: {e}; trying again in an hour"),
    }
}

/// Reads the store's counts for `/metrics`, the console and the
/// operator's backlog events.
async fn read_stats(relay: &Relay) {
    let now = relay.clock.now_ms();
    let stats = relay.store.stats(now).await;
    if let Some(op) = &relay.operator {
        let at = relay.clock.now();
        match &stats {
            Ok(s) => op.status_check(
                at,
                Ok((
                    u64::try_from(s.pending).unwrap_or(0),
                    s.oldest_pending_received_at
                        .and_then(|t| callpost_core::Timestamp::from_millis(t).ok()),
                )),
            ),
            Err(e) => op.status_check(at, Err(&e.to_string())),
        }
    }
    match stats {
        Ok(s) => {
            relay.metrics.set_stats(&s, now);
            relay.set_stats(s);
        }
        Err(e) => tracing::debug!("reading queue counts for /metrics failed: {e}"),
    }
}

/// Says every [`SENDER_HEARTBEAT_MS`] that this relay delivers, and hands
/// the number of relays that do to the guards; at each beat, and at once
/// when a guard disables an endpoint, brings the disabled endpoints of the
/// guards and of the database together. A failed call keeps the last
/// number. Run by a relay that delivers.
pub async fn heartbeat(relay: Arc<Relay>) {
    let mut random = [0u8; 8];
    // Without OS randomness, the process id and the time: two relays
    // would count as one only if both matched.
    let id = if getrandom::fill(&mut random).is_ok() {
        hex::encode(random)
    } else {
        format!("{}-{}", std::process::id(), relay.clock.now_ms())
    };
    let expiry = i64::try_from(SENDER_EXPIRY_MS).unwrap_or(i64::MAX);
    let mut senders = 1;
    let mut known = HashSet::new();
    let mut every = tokio::time::interval(Duration::from_millis(SENDER_HEARTBEAT_MS));
    loop {
        let beat = tokio::select! {
            _ = every.tick() => true,
            () = relay.guards.disabled_now.notified() => false,
        };
        if let Err(e) = sync_disabled(&relay, &mut known).await {
            tracing::warn!("recording or reading the disabled endpoints failed: {e}");
        }
        if !beat {
            continue;
        }
        let now = relay.clock.now_ms();
        match relay
            .store
            .heartbeat(&id, now, now.saturating_sub(expiry))
            .await
        {
            Ok(n) if n != senders => {
                senders = n;
                relay.guards.set_senders(n);
                if n == 1 {
                    tracing::info!(
                        "this relay alone delivers from this database: it takes every \
                         endpoint's whole rate limit and cap"
                    );
                } else {
                    tracing::info!(
                        "{n} relays deliver from this database: each takes 1/{n} of every \
                         endpoint's rate limit and cap"
                    );
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("saying this relay delivers failed: {e}"),
        }
    }
}

/// Brings the guards and the database's disabled endpoints together: a
/// URL this relay's guard disabled is recorded; one the database holds is
/// disabled here too (at start, or another relay disabled it); one that
/// was recorded and is gone was enabled by an operator through another
/// relay. `known` is what the database held at the last look.
async fn sync_disabled(relay: &Relay, known: &mut HashSet<String>) -> Result<(), StoreError> {
    let stored: HashSet<String> = relay
        .store
        .disabled_endpoints()
        .await?
        .into_iter()
        .collect();
    let now = relay.clock.now();
    let local: HashSet<String> = relay.guards.disabled().into_iter().collect();
    let mut seen = stored.clone();
    for url in local.difference(&stored) {
        if known.contains(url) {
            relay.guards.enable(url, now);
        } else {
            relay
                .store
                .set_endpoint_disabled(url, true, now.as_millis())
                .await?;
            seen.insert(url.clone());
        }
    }
    for url in stored.difference(&local) {
        relay.guards.disable_quietly(url, now);
    }
    *known = seen;
    Ok(())
}

//! The relay's metrics, as Prometheus text (`GET /metrics`, behind the
//! admin token).
//!
//! Counters live in this process. The queue gauges (pending, dead letters,
//! the oldest pending call's age) come from the store's counts, read on an
//! interval by the relay ([`Metrics::set_stats`]), never per scrape: a
//! scrape costs no database work however large the tables grow.

use crate::store::Stats;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// Commit latency buckets, seconds: fsync on an SSD is 0.1-2 ms; the
/// benchmark's p99 for the whole acknowledgement is 25 ms.
const COMMIT_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Every metric the relay keeps.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    calls: Family<Labels, Counter>,
    deliveries: Family<Labels, Counter>,
    destination_deliveries: Family<Labels, Counter>,
    attempts: Family<Labels, Counter>,
    endpoint_states: Family<Labels, Counter>,
    operator_events: Family<Labels, Counter>,
    token_requests: Family<Labels, Counter>,
    sql_statements: Counter<u64, AtomicU64>,
    sqlite_wal_bytes: Counter<u64, AtomicU64>,
    stale_finishes: Counter,
    trace_spans_dropped: Counter,
    conflicts: Counter<u64, AtomicU64>,
    commit_seconds: Histogram,
    connections_refused: Family<Labels, Counter>,
    connections_open: Family<Labels, Gauge>,
    admin_auth_failures: Counter,
    timeouts: Family<Labels, Counter>,
    backlog: Gauge,
    queue_depth: Gauge,
    in_flight: Gauge,
    dead_letters: Gauge,
    undeliverable: Gauge,
    rejected_calls: Gauge,
    oldest_pending_age: Gauge<f64, AtomicU64>,
    store_healthy: Gauge,
    store_group_healthy: Family<Labels, Gauge>,
    committed_calls: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric, at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("callpost_relay");
        let m = Self {
            requests: Family::default(),
            calls: Family::default(),
            deliveries: Family::default(),
            destination_deliveries: Family::default(),
            attempts: Family::default(),
            endpoint_states: Family::default(),
            operator_events: Family::default(),
            token_requests: Family::default(),
            sql_statements: Counter::default(),
            sqlite_wal_bytes: Counter::default(),
            stale_finishes: Counter::default(),
            trace_spans_dropped: Counter::default(),
            conflicts: Counter::default(),
            commit_seconds: Histogram::new(COMMIT_BUCKETS),
            connections_refused: Family::default(),
            connections_open: Family::default(),
            admin_auth_failures: Counter::default(),
            timeouts: Family::default(),
            backlog: Gauge::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            dead_letters: Gauge::default(),
            undeliverable: Gauge::default(),
            rejected_calls: Gauge::default(),
            oldest_pending_age: Gauge::default(),
            store_healthy: Gauge::default(),
            store_group_healthy: Family::default(),
            committed_calls: AtomicI64::new(0),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "requests",
            "Tracking API requests, by HTTP status answered",
            m.requests.clone(),
        );
        r.register(
            "calls",
            "Calls received: accepted, duplicate (already stored), rejected (by code) or suppressed (acknowledged, not stored)",
            m.calls.clone(),
        );
        r.register(
            "deliveries",
            "Deliveries ended: delivered, dead (dead letter), disabled (integrations), filtered (destination filters), undeliverable",
            m.deliveries.clone(),
        );
        r.register(
            "destination_deliveries",
            "Deliveries ended, by source, destination and outcome (as deliveries counts them)",
            m.destination_deliveries.clone(),
        );
        r.register(
            "webhook_attempts",
            "Webhook attempts, by result",
            m.attempts.clone(),
        );
        r.register(
            "oauth_token_requests",
            "OAuth 2.0 token requests of endpoints with oauth2 auth: ok, refused (an error status), invalid (an unusable answer) or unreachable",
            m.token_requests.clone(),
        );
        r.register(
            "endpoint_state_changes",
            "Changes of an endpoint's state (healthy, slowed, circuit_open, probing, disabled), by the state entered",
            m.endpoint_states.clone(),
        );
        r.register(
            "operator_events",
            "Operational events to the operator's destination: sent, failed (a try that was not taken), dropped (given up)",
            m.operator_events.clone(),
        );
        r.register(
            "sql_statements",
            "SQL statements run, BEGIN and COMMIT included",
            m.sql_statements.clone(),
        );
        r.register(
            "sqlite_wal_bytes",
            "Bytes appended to SQLite's write-ahead log, index pages and frame headers included (0 on Postgres)",
            m.sqlite_wal_bytes.clone(),
        );
        r.register(
            "trace_spans_dropped",
            "Spans not exported: the queue for the OTLP collector was full, or the collector did not take them",
            m.trace_spans_dropped.clone(),
        );
        r.register(
            "stale_finishes",
            "Delivery results refused because the lease had passed to another worker",
            m.stale_finishes.clone(),
        );
        r.register(
            "transaction_conflicts",
            "Transactions Postgres aborted for a deadlock or serialization failure, and that ran again",
            m.conflicts.clone(),
        );
        r.register(
            "commit_seconds",
            "Storage transaction latency (group commit)",
            m.commit_seconds.clone(),
        );
        r.register(
            "connections_refused",
            "Connections closed at accept because the listener's connection cap was reached",
            m.connections_refused.clone(),
        );
        r.register(
            "connections_open",
            "Open connections, by listener",
            m.connections_open.clone(),
        );
        r.register(
            "admin_auth_failures",
            "Admin requests refused for a missing or wrong token",
            m.admin_auth_failures.clone(),
        );
        r.register(
            "request_timeouts",
            "Connections closed for a slow header or body, or idle too long",
            m.timeouts.clone(),
        );
        r.register(
            "ingest_backlog_calls",
            "Calls waiting for the storage writer",
            m.backlog.clone(),
        );
        r.register(
            "queue_depth",
            "Deliveries pending (due or waiting for a retry)",
            m.queue_depth.clone(),
        );
        r.register(
            "in_flight",
            "Deliveries held by a worker now",
            m.in_flight.clone(),
        );
        r.register(
            "dead_letters",
            "Deliveries that gave up, waiting for a replay",
            m.dead_letters.clone(),
        );
        r.register(
            "undeliverable_calls",
            "Calls stored with no enabled destination, replayable",
            m.undeliverable.clone(),
        );
        r.register(
            "rejected_calls",
            "Calls refused inside accepted batches, kept for review",
            m.rejected_calls.clone(),
        );
        r.register(
            "oldest_pending_age_seconds",
            "Age of the oldest pending delivery",
            m.oldest_pending_age.clone(),
        );
        r.register(
            "store_healthy",
            "1 while the database answers, 0 since a call to it failed or timed out",
            m.store_healthy.clone(),
        );
        r.register(
            "store_group_healthy",
            "With several shard groups, by group: 1 while its database answers, 0 since a call to it failed or timed out",
            m.store_group_healthy.clone(),
        );
        Self { registry, ..m }
    }

    /// A Tracking API answer.
    pub fn request(&self, status: u16) {
        self.requests
            .get_or_create(&vec![("status", status.to_string())])
            .inc();
    }

    /// Calls of `source`: `accepted`, `duplicate` or `rejected` (with the
    /// core's `code`).
    pub fn calls(&self, source: &str, outcome: &'static str, n: u64, code: Option<&str>) {
        let mut labels = vec![
            ("source", source.to_owned()),
            ("outcome", outcome.to_owned()),
        ];
        if let Some(code) = code {
            labels.push(("code", code.to_owned()));
        }
        self.calls.get_or_create(&labels).inc_by(n);
    }

    /// A delivery ended: `delivered`, `dead`, `disabled`, `filtered`, `undeliverable`.
    pub fn delivery(&self, outcome: &'static str, n: u64) {
        self.deliveries
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc_by(n);
    }

    /// A delivery to `destination` of `source` ended ([`Metrics::delivery`],
    /// counted by destination as well). Labels are bounded: sources are an
    /// operator's, and each has at most 16 destinations.
    pub fn delivery_to(&self, source: &str, destination: &str, outcome: &'static str, n: u64) {
        self.delivery(outcome, n);
        self.destination_deliveries
            .get_or_create(&vec![
                ("source", source.to_owned()),
                ("destination", destination.to_owned()),
                ("outcome", outcome.to_owned()),
            ])
            .inc_by(n);
    }

    /// A webhook attempt: an HTTP status class (`2xx` …) or `timeout`,
    /// `connection`, `tls`, `held`, `token`.
    pub fn attempt(&self, result: &str) {
        self.attempts
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }

    /// An OAuth 2.0 token request ended: `ok`, `refused`, `invalid` or
    /// `unreachable`.
    pub fn token_request(&self, result: &'static str) {
        self.token_requests
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }

    /// An endpoint entered `state` (the core's receiver protections).
    pub fn endpoint_state(&self, state: &str) {
        self.endpoint_states
            .get_or_create(&vec![("state", state.to_owned())])
            .inc();
    }

    /// An operational event: `sent`, `failed` (one try) or `dropped`.
    pub fn operator_event(&self, result: &str) {
        self.operator_events
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }

    /// Results refused because their lease had passed on.
    pub fn stale_finishes(&self, n: u64) {
        self.stale_finishes.inc_by(n);
    }

    /// Spans not exported (`[tracing]`).
    pub fn trace_spans_dropped(&self, n: u64) {
        self.trace_spans_dropped.inc_by(n);
    }

    /// Spans not exported since start (tests).
    pub fn trace_spans_dropped_total(&self) -> u64 {
        self.trace_spans_dropped.get()
    }

    /// A transaction's commit.
    pub fn commit(&self, took: Duration, calls: usize) {
        self.commit_seconds.observe(took.as_secs_f64());
        self.committed_calls
            .fetch_add(calls as i64, Ordering::Relaxed);
    }

    /// Calls a receiver took since start (the console's delivery rate).
    pub fn delivered_calls(&self) -> u64 {
        self.deliveries
            .get_or_create(&vec![("outcome", "delivered".to_owned())])
            .get()
    }

    /// Calls committed since start (tests and the benchmark).
    pub fn committed_calls(&self) -> i64 {
        self.committed_calls.load(Ordering::Relaxed)
    }

    /// A connection closed at accept on `listener` (`api`, `admin`).
    pub fn connection_refused(&self, listener: &'static str) {
        self.connections_refused
            .get_or_create(&vec![("listener", listener.to_owned())])
            .inc();
    }

    /// Open connections on `listener` went up (`+1`) or down (`-1`).
    pub fn connections(&self, listener: &'static str, delta: i64) {
        self.connections_open
            .get_or_create(&vec![("listener", listener.to_owned())])
            .inc_by(delta);
    }

    /// An admin request without the right token.
    pub fn admin_auth_failure(&self) {
        self.admin_auth_failures.inc();
    }

    /// A connection cut off: `header`, `body` or `idle`.
    pub fn timeout(&self, what: &'static str) {
        self.timeouts
            .get_or_create(&vec![("phase", what.to_owned())])
            .inc();
    }

    /// The store's latest counts, read on an interval.
    pub fn set_stats(&self, stats: &Stats, now_ms: i64) {
        self.queue_depth.set(stats.pending);
        self.in_flight.set(stats.in_flight);
        self.dead_letters.set(stats.dead);
        self.undeliverable.set(stats.undeliverable);
        self.rejected_calls.set(stats.rejected);
        let age = stats
            .oldest_pending_received_at
            .map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0);
        self.oldest_pending_age.set(age);
    }

    /// The Prometheus text, with the values the store keeps itself.
    pub fn render(&self, store: &StoreCounts<'_>) -> String {
        self.backlog.set(store.backlog as i64);
        // The store counts these itself; each counter is brought up to its
        // total (counters only go up).
        for (counter, total) in [
            (&self.sql_statements, store.statements),
            (&self.conflicts, store.conflicts),
            (&self.sqlite_wal_bytes, store.wal_bytes.unwrap_or(0)),
        ] {
            let seen = counter.get();
            if total > seen {
                counter.inc_by(total - seen);
            }
        }
        self.store_healthy.set(i64::from(store.healthy));
        for (group, healthy) in store.groups {
            self.store_group_healthy
                .get_or_create(&vec![("group", group.clone())])
                .set(i64::from(*healthy));
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// What the store counts itself, read at each scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreCounts<'a> {
    /// Calls waiting for the writer.
    pub backlog: usize,
    /// SQL statements run.
    pub statements: u64,
    /// Transactions run again after a conflict.
    pub conflicts: u64,
    /// Bytes appended to SQLite's write-ahead log (none on Postgres).
    pub wal_bytes: Option<u64>,
    /// Whether the last store call succeeded (in any shard group).
    pub healthy: bool,
    /// Each shard group's health, with several.
    pub groups: &'a [(String, bool)],
}

/// Shared by every part of the relay.
pub type SharedMetrics = Arc<Metrics>;

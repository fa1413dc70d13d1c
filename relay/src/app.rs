//! The relay's shared state: configuration, store, clock, metrics, and the
//! switches the listeners and the delivery workers share.

use crate::clock::Clock;
use crate::config::{Config, Source};
use crate::deliver::Guards;
use crate::metrics::Metrics;
use crate::notify::Operator;
use crate::store::{Stats, Store};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Everything the listeners, the delivery workers and the operations share.
pub struct Relay {
    /// The configuration it started with.
    pub cfg: Arc<Config>,
    /// write key → source.
    pub write_keys: HashMap<String, Arc<Source>>,
    /// Where calls are kept.
    pub store: Arc<dyn Store>,
    /// The relay's time.
    pub clock: Arc<Clock>,
    /// Counters and gauges.
    pub metrics: Arc<Metrics>,
    /// Wakes the delivery workers: new calls were stored, a replay made
    /// some due, or the clock moved.
    pub wake: Arc<Notify>,
    /// Operational events (`[operator]`), if configured.
    pub operator: Option<Arc<Operator>>,
    /// Receiver protection per endpoint URL (`/admin/status` shows it).
    pub guards: Arc<Guards>,
    /// The store's latest counts (read on an interval for `/metrics`).
    pub stats: Mutex<Option<Stats>>,
    ready: AtomicBool,
}

impl Relay {
    /// The relay over `store`, not yet ready.
    pub fn new(cfg: Config, store: Arc<dyn Store>, clock: Arc<Clock>) -> Self {
        let write_keys = cfg.write_keys();
        let metrics = Arc::new(Metrics::new());
        // Only a relay that delivers sends events (it has the HTTP client).
        let operator = (cfg.deliver)
            .then_some(cfg.operator.as_ref())
            .flatten()
            .and_then(Operator::new)
            .map(Arc::new);
        let guards = Arc::new(Guards::new(
            cfg.protections.clone(),
            Arc::clone(&metrics),
            operator.clone(),
        ));
        Self {
            cfg: Arc::new(cfg),
            write_keys,
            store,
            clock,
            metrics,
            operator,
            guards,
            wake: Arc::new(Notify::new()),
            stats: Mutex::new(None),
            ready: AtomicBool::new(false),
        }
    }

    /// Whether ingest takes calls: started, not stopping.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Starts or stops taking calls.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether `/readyz` says ready: taking calls, the database answering,
    /// and the writer not behind.
    pub fn is_healthy(&self) -> bool {
        self.is_ready() && self.store.healthy() && self.store.backlog() <= self.cfg.max_backlog
    }

    /// The source named `name`.
    pub fn source(&self, name: &str) -> Option<&Arc<Source>> {
        self.cfg.source(name)
    }

    /// The names of the sources with an enabled destination.
    pub fn routed_sources(&self) -> Vec<String> {
        self.cfg
            .sources
            .iter()
            .filter(|s| s.destination().is_some())
            .map(|s| s.name.clone())
            .collect()
    }
}

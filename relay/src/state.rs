//! The relay's shared state: configuration, the sources in force, store,
//! clock, metrics, and the switches the listeners, the delivery workers and
//! the operations share. [`crate::app`] builds it; nothing here starts a
//! task.

use crate::clock::Clock;
use crate::config::{Config, Overrides, Source};
use crate::guards::Guards;
use crate::metrics::Metrics;
use crate::notify::Operator;
use crate::store::{routed_key, Stats, Store};
use crate::trace::Tracer;
use callpost_core::protection::ProtectionConfig;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use tokio::sync::Notify;

/// The sources in force, replaced whole when the configuration is
/// reloaded: whoever holds one has a consistent set.
#[derive(Debug, Default)]
pub struct Sources {
    /// Every source.
    pub list: Vec<Arc<Source>>,
    /// write key → source.
    pub write_keys: HashMap<String, Arc<Source>>,
    /// The receiver protections of each endpoint URL that has settings.
    pub protections: HashMap<String, ProtectionConfig>,
    /// Counts the sets this relay has had (0: the one it started with).
    pub generation: u64,
}

impl Sources {
    /// A set of sources already checked as a set
    /// ([`crate::config::checked_set`]).
    pub fn new(
        list: Vec<Arc<Source>>,
        protections: HashMap<String, ProtectionConfig>,
        generation: u64,
    ) -> Self {
        let mut write_keys = HashMap::new();
        for s in &list {
            for k in &s.write_keys {
                write_keys.insert(k.expose().to_owned(), Arc::clone(s));
            }
        }
        Self {
            list,
            write_keys,
            protections,
            generation,
        }
    }

    /// The source named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Source>> {
        self.list.iter().find(|s| s.name == name)
    }

    /// The names of the sources, in order.
    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|s| s.name.clone()).collect()
    }

    /// The names of the sources with an enabled destination.
    pub fn routed(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| s.enabled().next().is_some())
            .map(|s| s.name.clone())
            .collect()
    }

    /// Every enabled destination, as [`crate::store::routed_key`] names it.
    pub fn routed_keys(&self) -> Vec<String> {
        self.list
            .iter()
            .flat_map(|s| s.enabled().map(|d| routed_key(&s.name, &d.name)))
            .collect()
    }
}

/// Everything the listeners, the delivery workers and the operations share.
pub struct Relay {
    /// The configuration it started with (its sources may have been
    /// reloaded since: [`Relay::sources`]).
    pub cfg: Arc<Config>,
    sources: RwLock<Arc<Sources>>,
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
    /// OpenTelemetry spans (`[tracing]`); `None`: no span is made, no
    /// `traceparent` sent.
    pub tracer: Option<Arc<Tracer>>,
    /// The store's latest counts (read on an interval for `/metrics`).
    stats: Mutex<Option<Stats>>,
    /// How the configuration was read at start, so a reload reads it the
    /// same way (unset: nothing to read again, as in tests).
    pub reload_from: OnceLock<Overrides>,
    /// The stored sources as this relay last read them (sealed), so an
    /// unchanged set is not checked and put in force again.
    stored_rows: Mutex<Option<Vec<(String, String)>>>,
    /// The suppressed users' keyed hashes, as this relay last read them.
    suppressed: RwLock<Arc<HashSet<String>>>,
    /// With a secret key: what seals the stored calls and keys the user
    /// hashes (set once at the start, [`crate::store::sealed`]).
    pub sealer: OnceLock<Arc<crate::store::sealed::Sealer>>,
    ready: AtomicBool,
}

impl Relay {
    /// The relay over `store`, not yet ready.
    pub fn new(cfg: Config, store: Arc<dyn Store>, clock: Arc<Clock>) -> Self {
        let sources = RwLock::new(Arc::new(Sources::new(
            cfg.sources.clone(),
            cfg.protections.clone(),
            0,
        )));
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
        let tracer = cfg.tracing.as_ref().and_then(|t| {
            Tracer::new(t, cfg.ca_file.as_deref(), Arc::clone(&metrics))
                .map_err(|e| tracing::error!("tracing is off: {e}"))
                .ok()
                .map(Arc::new)
        });
        Self {
            tracer,
            cfg: Arc::new(cfg),
            sources,
            store,
            clock,
            metrics,
            operator,
            guards,
            wake: Arc::new(Notify::new()),
            stats: Mutex::new(None),
            reload_from: OnceLock::new(),
            stored_rows: Mutex::new(None),
            suppressed: RwLock::new(Arc::new(HashSet::new())),
            sealer: OnceLock::new(),
            ready: AtomicBool::new(false),
        }
    }

    /// The suppressed users' keyed hashes in force.
    pub fn suppressed(&self) -> Arc<HashSet<String>> {
        Arc::clone(
            &self
                .suppressed
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Puts a set of suppressed users' hashes in force.
    pub fn set_suppressed(&self, hashes: HashSet<String>) {
        *self
            .suppressed
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(hashes);
    }

    /// Reads the suppressed users again (with a secret key: without one no
    /// user can be suppressed).
    pub async fn reload_suppressed(&self) -> Result<(), crate::store::StoreError> {
        if self.cfg.secret_key.is_some() {
            let hashes = self.store.suppressions().await?;
            self.set_suppressed(hashes.into_iter().collect());
        }
        Ok(())
    }

    /// Whether a call of `user_id` or `anonymous_id` is suppressed, given
    /// the set in force (`suppressed()`, read once per request).
    pub fn is_suppressed(
        &self,
        set: &HashSet<String>,
        user_id: Option<&str>,
        anonymous_id: Option<&str>,
    ) -> bool {
        let Some(key) = self.sealer.get() else {
            return false;
        };
        !set.is_empty()
            && [user_id, anonymous_id]
                .into_iter()
                .flatten()
                .filter(|id| !id.is_empty())
                .any(|id| set.contains(&key.user_hash(id)))
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

    /// The sources in force now.
    pub fn sources(&self) -> Arc<Sources> {
        Arc::clone(&self.sources.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `list` (checked as a set, with the protection of each
    /// endpoint URL that has one) in force: new calls are taken for them at
    /// once, and each delivery's next round uses its source's destination
    /// as it is then. The receiver protections follow.
    pub fn put_sources(
        &self,
        list: Vec<Arc<Source>>,
        protections: HashMap<String, ProtectionConfig>,
        now: callpost_core::Timestamp,
    ) {
        let mut slot = self.sources.write().unwrap_or_else(PoisonError::into_inner);
        let next = Arc::new(Sources::new(list, protections, slot.generation + 1));
        self.guards.set_protections(next.protections.clone(), now);
        *slot = next;
        drop(slot);
        self.wake.notify_one();
    }

    /// The store's counts as last read (`housekeeping`), if any yet.
    pub fn stats(&self) -> Option<Stats> {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Keeps the store's counts as read now.
    pub fn set_stats(&self, stats: Stats) {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = Some(stats);
    }

    /// Whether `rows` are the stored sources as last read.
    pub(crate) fn stored_rows_seen(&self, rows: &[(String, String)]) -> bool {
        self.stored_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
            == Some(rows)
    }

    /// Remembers the stored sources as read now.
    pub(crate) fn set_stored_rows(&self, rows: Vec<(String, String)>) {
        *self
            .stored_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(rows);
    }

    /// Forgets them, so the next read puts them in force again.
    pub(crate) fn forget_stored_rows(&self) {
        *self
            .stored_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

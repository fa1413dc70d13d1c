//! Receiver protection per endpoint URL: one core `EndpointGuard` for each
//! URL this relay posts to, shared by every source that posts there, and
//! read by `/admin/status`.
//!
//! Every decision is the guard's; this module only keeps the guards,
//! reports each state change (log and metric), and shows their states,
//! with each URL's recent answers: how many were successes, and how long
//! they took (over the latest [`RECENT_ANSWERS`]).

use crate::metrics::Metrics;
use crate::notify::Operator;
use callpost_core::ops::shown_url;
use callpost_core::protection::{EndpointGuard, EndpointState, Hold, ProtectionConfig};
use callpost_core::{Outcome, Timestamp, Verdict};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use tokio::sync::Notify;

/// How many of an endpoint's latest answers its success rate and latency
/// are taken over: enough for a percentage and a 95th percentile that mean
/// something (5 answers above it), few enough that an endpoint that
/// recovers looks recovered within a minute at a few requests a second,
/// and a sort of them per `/admin/status` costs nothing.
pub(crate) const RECENT_ANSWERS: usize = 100;

/// The guards of one relay, by endpoint URL.
pub struct Guards {
    map: Mutex<BTreeMap<String, Arc<Guarded>>>,
    protections: RwLock<HashMap<String, ProtectionConfig>>,
    /// Relays delivering from the database, this one included: each
    /// guard takes its part of its URL's limits.
    senders: AtomicU32,
    metrics: Arc<Metrics>,
    operator: Option<Arc<Operator>>,
    /// A guard disabled its URL: the delivery workers record it at once.
    pub(crate) disabled_now: Notify,
    /// A guard holds its URL back (a pause, an open circuit): the delivery
    /// workers share it at once.
    pub(crate) held_now: Notify,
}

/// One endpoint URL's guard, and a wake-up for requests waiting for an
/// answer to it.
pub(crate) struct Guarded {
    url: String,
    guard: Mutex<EndpointGuard>,
    /// Its latest answers, oldest first; apart from the guard, which
    /// decides nothing with them.
    recent: Mutex<Recent>,
    pub(crate) answered: Notify,
}

/// An endpoint's latest [`RECENT_ANSWERS`] answers: whether each was a
/// success, and its latency in milliseconds.
#[derive(Debug, Default)]
struct Recent(VecDeque<(bool, u64)>);

impl Recent {
    fn push(&mut self, success: bool, latency_ms: u64) {
        if self.0.len() == RECENT_ANSWERS {
            self.0.pop_front();
        }
        self.0.push_back((success, latency_ms));
    }

    /// (answers, success rate, median and 95th percentile latency).
    fn summary(&self) -> (u32, Option<f64>, Option<u64>, Option<u64>) {
        let n = self.0.len();
        if n == 0 {
            return (0, None, None, None);
        }
        let ok = self.0.iter().filter(|(s, _)| *s).count();
        let mut latencies: Vec<u64> = self.0.iter().map(|(_, l)| *l).collect();
        latencies.sort_unstable();
        // Nearest rank: the smallest latency at least p% of answers are
        // within, one of the latencies seen (never an interpolation).
        let rank = |p: usize| latencies[(n * p).div_ceil(100).clamp(1, n) - 1];
        (
            u32::try_from(n).unwrap_or(u32::MAX),
            Some(ok as f64 / n as f64),
            Some(rank(50)),
            Some(rank(95)),
        )
    }
}

/// What `/admin/status` shows of one endpoint URL.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EndpointReport {
    /// The URL without credentials or query.
    pub url: String,
    /// Healthy, slowed, circuit open, probing or disabled, with until when.
    pub state: EndpointState,
    /// Failures in a row (timeouts, connection errors, 5xx).
    pub failures: u32,
    /// Requests sent and not yet answered.
    pub in_flight: u32,
    /// The first answer that was not a success since the last success.
    pub failing_since: Option<Timestamp>,
    /// How many answers the next three fields are taken over: this
    /// relay's latest, at most 100 (`RECENT_ANSWERS`; timeouts and connection
    /// failures count as answers; requests held back by the guard do not).
    pub recent_answers: u32,
    /// The share of those that were successes (2xx), from 0 to 1; `None`
    /// before the first answer.
    pub recent_success_rate: Option<f64>,
    /// Their median latency, from the request leaving to its answer (or
    /// its failure), in milliseconds.
    pub recent_latency_p50_ms: Option<u64>,
    /// Their 95th percentile latency, in milliseconds.
    pub recent_latency_p95_ms: Option<u64>,
}

impl Guards {
    /// Guards with `protections` for the URLs that have settings (every
    /// other URL gets the core's defaults); state changes are counted in
    /// `metrics` and told to the `operator`.
    pub fn new(
        protections: HashMap<String, ProtectionConfig>,
        metrics: Arc<Metrics>,
        operator: Option<Arc<Operator>>,
    ) -> Self {
        Self {
            map: Mutex::new(BTreeMap::new()),
            protections: RwLock::new(protections),
            senders: AtomicU32::new(1),
            metrics,
            operator,
            disabled_now: Notify::new(),
            held_now: Notify::new(),
        }
    }

    /// The guard of `url`, made on its first use.
    pub(crate) fn get(&self, url: &str, now: Timestamp) -> Arc<Guarded> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(g) = map.get(url) {
            return Arc::clone(g);
        }
        let config = self.protection(url);
        // The configuration was checked at start; the defaults always pass.
        let mut guard = EndpointGuard::new(config, now)
            .or_else(|_| EndpointGuard::new(ProtectionConfig::default(), now))
            .unwrap_or_else(|_| unreachable!("the default protections are valid"));
        guard.handle_senders(self.senders.load(Ordering::Acquire));
        let g = Arc::new(Guarded {
            url: url.to_owned(),
            guard: Mutex::new(guard),
            recent: Mutex::new(Recent::default()),
            answered: Notify::new(),
        });
        map.insert(url.to_owned(), Arc::clone(&g));
        g
    }

    /// Whether some URL has a rate limit or a cap, which relays on one
    /// database share.
    pub fn shares_limits(&self) -> bool {
        self.protections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(ProtectionConfig::is_shared)
    }

    fn protection(&self, url: &str) -> ProtectionConfig {
        self.protections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(url)
            .copied()
            .unwrap_or_default()
    }

    /// The protections changed (a reload): each guard whose settings did
    /// continues from what it remembers under the new ones.
    pub fn set_protections(&self, protections: HashMap<String, ProtectionConfig>, now: Timestamp) {
        *self
            .protections
            .write()
            .unwrap_or_else(PoisonError::into_inner) = protections;
        let guards = self.all();
        let senders = self.senders.load(Ordering::Acquire);
        for g in guards {
            let config = self.protection(&g.url);
            let mut guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
            if *guard.config() == config {
                continue;
            }
            // Checked when the configuration was loaded.
            if let Ok(mut next) = EndpointGuard::restore(config, guard.state().clone(), now) {
                next.handle_senders(senders);
                *guard = next;
            }
        }
    }

    /// `n` relays deliver from the database now: every guard takes its
    /// part of its URL's limits from the next request on.
    pub fn set_senders(&self, n: u32) {
        self.senders.store(n, Ordering::Release);
        let guards = self.all();
        for g in guards {
            g.guard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .handle_senders(n);
        }
    }

    /// An operator enables `url` again (as `/admin/status` shows it, or in
    /// full): what its guard remembered of failures is forgotten. Returns
    /// the full URLs that matched.
    pub fn enable(&self, url: &str, now: Timestamp) -> Vec<String> {
        let guards: Vec<Arc<Guarded>> = self
            .all()
            .into_iter()
            .filter(|g| g.url == url || shown_url(&g.url) == url)
            .collect();
        for g in &guards {
            self.with(g, now, |guard| guard.enable(now));
            g.answered.notify_waiters();
        }
        guards.iter().map(|g| g.url.clone()).collect()
    }

    /// The request `g` guards that left at `sent` was answered (or timed
    /// out, or failed) at `now`: its guard hears the outcome, and the
    /// recent answers keep it. Call it before freeing the request's slot,
    /// so the next request to its URL is judged with it.
    pub(crate) fn answered(&self, g: &Guarded, sent: Timestamp, now: Timestamp, outcome: &Outcome) {
        self.with(g, now, |guard| guard.handle_outcome(now, outcome));
        let latency_ms = u64::try_from(now.millis_since(sent)).unwrap_or(0);
        g.recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(outcome.verdict() == Verdict::Success, latency_ms);
    }

    /// Runs `f` on `g`'s guard, then reports each state change it made.
    pub(crate) fn with<T>(
        &self,
        g: &Guarded,
        now: Timestamp,
        f: impl FnOnce(&mut EndpointGuard) -> T,
    ) -> T {
        let mut guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f(&mut guard);
        self.report_changes(g, &mut guard, now, true);
        out
    }

    /// Logs and counts each state change of `guard`; tells the operator
    /// too when `tell` (a change this relay's guard decided, not one read
    /// from the database that another relay decided and told).
    fn report_changes(&self, g: &Guarded, guard: &mut EndpointGuard, now: Timestamp, tell: bool) {
        while let Some(ev) = guard.poll_event() {
            self.metrics.endpoint_state(ev.to.as_str());
            if let Some(op) = self.operator.as_ref().filter(|_| tell) {
                op.guard_event(now, &g.url, &ev, guard.state().failing_since);
            }
            if tell && ev.to == EndpointState::Disabled {
                self.disabled_now.notify_one();
            }
            if tell
                && matches!(
                    ev.to,
                    EndpointState::Slowed { .. } | EndpointState::CircuitOpen { .. }
                )
            {
                self.held_now.notify_one();
            }
            let url = shown_url(&g.url);
            let why = |own: &'static str| {
                if tell {
                    own
                } else {
                    "held by another relay, or before a restart"
                }
            };
            match ev.to {
                EndpointState::CircuitOpen { until } => tracing::warn!(
                    "endpoint {url}: circuit open ({}); one probe in {} s",
                    why("failures in a row"),
                    until.millis_since(now).max(0) / 1000
                ),
                EndpointState::Slowed { until } => tracing::info!(
                    "endpoint {url}: waiting {} s ({})",
                    until.millis_since(now).max(0) / 1000,
                    why("Retry-After")
                ),
                to => tracing::info!("endpoint {url}: {}", to.as_str()),
            }
        }
    }

    /// The full URLs whose guards have disabled them.
    pub fn disabled(&self) -> Vec<String> {
        self.all()
            .iter()
            .filter(|g| {
                g.guard
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .state()
                    .disabled
            })
            .map(|g| g.url.clone())
            .collect()
    }

    /// The database says `url` is disabled (this relay restarted, or
    /// another relay disabled it): its guard is too, without telling the
    /// operator again.
    pub fn disable_quietly(&self, url: &str, now: Timestamp) {
        let g = self.get(url, now);
        let mut guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
        guard.disable(now);
        self.report_changes(&g, &mut guard, now, false);
    }

    /// What each guard holds back at `now`, to share.
    pub fn holds(&self, now: Timestamp) -> Vec<(String, Hold)> {
        self.all()
            .iter()
            .filter_map(|g| {
                let guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
                guard.hold(now).map(|h| (g.url.clone(), h))
            })
            .collect()
    }

    /// What another relay's guard (or this relay's, before a restart) holds
    /// back for `url`: its guard holds back too, without telling the
    /// operator again.
    pub fn handle_hold(&self, url: &str, hold: &Hold, now: Timestamp) {
        let g = self.get(url, now);
        let mut guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
        guard.handle_hold(now, hold);
        self.report_changes(&g, &mut guard, now, false);
    }

    fn all(&self) -> Vec<Arc<Guarded>> {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Every endpoint URL this relay has posted to, in URL order, as it
    /// stands at `now`.
    pub fn report(&self, now: Timestamp) -> Vec<EndpointReport> {
        let guards = self.all();
        guards
            .iter()
            .map(|g| {
                let (answers, rate, p50, p95) = g
                    .recent
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .summary();
                let guard = g.guard.lock().unwrap_or_else(PoisonError::into_inner);
                let s = guard.state();
                EndpointReport {
                    url: shown_url(&g.url),
                    state: guard.endpoint_state(now),
                    failures: s.failures,
                    in_flight: s.in_flight,
                    failing_since: s.failing_since,
                    recent_answers: answers,
                    recent_success_rate: rate,
                    recent_latency_p50_ms: p50,
                    recent_latency_p95_ms: p95,
                }
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms).unwrap()
    }

    fn ok() -> Outcome {
        Outcome::Response {
            status: 200,
            retry_after: None,
        }
    }

    #[test]
    fn the_report_shows_the_recent_success_rate_and_latency() {
        let guards = Guards::new(HashMap::new(), Arc::new(Metrics::new()), None);
        let url = "https://hooks.example.com/in";
        let g = guards.get(url, at(0));
        let fresh = &guards.report(at(0))[0];
        assert_eq!(fresh.recent_answers, 0);
        assert_eq!(fresh.recent_success_rate, None);
        assert_eq!(fresh.recent_latency_p50_ms, None);
        // 90 successes taking 1..=90 ms, then 10 timeouts of 1 s.
        for i in 1..=90 {
            guards.answered(&g, at(1_000), at(1_000 + i), &ok());
        }
        for _ in 0..10 {
            guards.answered(&g, at(1_000), at(2_000), &Outcome::Timeout);
        }
        let r = &guards.report(at(3_000))[0];
        assert_eq!(r.recent_answers, 100);
        assert_eq!(r.recent_success_rate, Some(0.9));
        assert_eq!(r.recent_latency_p50_ms, Some(50));
        assert_eq!(r.recent_latency_p95_ms, Some(1_000));
        // The guard heard them: ten failures in a row open the circuit.
        assert_eq!(r.failures, 10);
        assert_eq!(r.state.as_str(), "circuit_open");
    }

    #[test]
    fn only_the_latest_answers_count() {
        let mut recent = Recent::default();
        for _ in 0..RECENT_ANSWERS {
            recent.push(false, 5_000);
        }
        for _ in 0..RECENT_ANSWERS {
            recent.push(true, 20);
        }
        let (n, rate, p50, p95) = recent.summary();
        assert_eq!(
            (n as usize, rate, p50, p95),
            (RECENT_ANSWERS, Some(1.0), Some(20), Some(20))
        );
        let mut one = Recent::default();
        one.push(true, 7);
        assert_eq!(one.summary(), (1, Some(1.0), Some(7), Some(7)));
    }
}

//! Operational events to the operator's own Webhooks destination
//! (`[operator]`): the host of the core's `notify::Notifier`.
//!
//! The relay reports what it sees (an endpoint's state changes, dead
//! letters, the backlog and the database at each 5-second status check);
//! which of those become events, when, and how each is retried are the
//! core's rules. One task sends them, one at a time, through the delivery
//! client (the same TLS trust and private-network rule as deliveries).
//! Events still queued when the relay stops are not sent: they are news of
//! the moment, and the log and metrics keep the same facts.

use crate::clock::Clock;
use crate::config::Operator as OperatorConfig;
use crate::metrics::Metrics;
use callpost_core::protection::GuardEvent;
use callpost_core::{Notifier, Outcome, Timestamp};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// The longest the sender sleeps without asking the notifier again: a
/// bound on a missed wake-up.
const IDLE_POLL: Duration = Duration::from_secs(5);

/// What the relay tells its operator.
pub struct Operator {
    notifier: Mutex<Notifier>,
    wake: Notify,
}

impl Operator {
    /// The notifier for `cfg` (checked when the configuration was loaded).
    pub fn new(cfg: &OperatorConfig) -> Option<Self> {
        let seed = getrandom::u64().unwrap_or(0x5eed);
        match Notifier::new(cfg.webhooks.clone(), cfg.notify, seed) {
            Ok(notifier) => Some(Self {
                notifier: Mutex::new(notifier),
                wake: Notify::new(),
            }),
            Err(e) => {
                tracing::error!("operational events are off: {e}");
                None
            }
        }
    }

    fn notifier(&self) -> MutexGuard<'_, Notifier> {
        // Each call is one method of the notifier: a poisoned lock still
        // holds consistent state.
        self.notifier.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn tell(&self, f: impl FnOnce(&mut Notifier)) {
        f(&mut self.notifier());
        self.wake.notify_one();
    }

    /// An endpoint's guard changed state.
    pub fn guard_event(
        &self,
        now: Timestamp,
        url: &str,
        event: &GuardEvent,
        failing_since: Option<Timestamp>,
    ) {
        self.tell(|n| n.handle_guard_event(now, url, event, failing_since));
    }

    /// `n` calls of `source` became dead letters.
    pub fn dead_letters(&self, now: Timestamp, source: &str, n: u64) {
        self.tell(|x| x.handle_dead_letters(now, source, n));
    }

    /// The status check's counts, or its failure.
    pub fn status_check(&self, now: Timestamp, counts: Result<(u64, Option<Timestamp>), &str>) {
        self.tell(|n| match counts {
            Ok((pending, oldest)) => {
                n.handle_database(now, Ok(()));
                n.handle_backlog(now, pending, oldest);
            }
            Err(reason) => n.handle_database(now, Err(reason)),
        });
    }

    /// Sends what the notifier gives, until the task is dropped. `post`
    /// sends one request within its budget.
    pub(crate) async fn run<F, Fut>(
        self: Arc<Self>,
        clock: Arc<Clock>,
        metrics: Arc<Metrics>,
        post: F,
    ) where
        F: Fn(callpost_core::Request, Duration) -> Fut,
        Fut: Future<Output = Outcome>,
    {
        let mut dropped = 0;
        loop {
            let now = clock.now();
            let mut random = [0u8; 16];
            // Without OS randomness the id is all zeros: still sent, and
            // the receiver's deduplication is the only thing it weakens.
            let _ = getrandom::fill(&mut random);
            let next = self.notifier().poll_request(now, random);
            if let Some(a) = next {
                let budget = Duration::from_millis(
                    u64::try_from(a.deadline.millis_since(now))
                        .unwrap_or(1)
                        .max(1),
                );
                let outcome = post(a.request, budget).await;
                let ok = outcome.verdict() == callpost_core::retry::Verdict::Success;
                metrics.operator_event(if ok { "sent" } else { "failed" });
                if !ok {
                    tracing::warn!(
                        "an operational event ({}) was not taken: {}",
                        a.kind,
                        outcome.code()
                    );
                }
                let mut n = self.notifier();
                n.handle_response(clock.now(), a.token, &outcome);
                if n.dropped() > dropped {
                    let more = n.dropped() - dropped;
                    dropped = n.dropped();
                    drop(n);
                    for _ in 0..more {
                        metrics.operator_event("dropped");
                    }
                    tracing::warn!("{more} operational event(s) given up");
                }
                continue;
            }
            let wait = self
                .notifier()
                .poll_timeout()
                .map_or(IDLE_POLL, |at| {
                    Duration::from_millis(u64::try_from(at.millis_since(now)).unwrap_or(0))
                })
                .min(IDLE_POLL);
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
